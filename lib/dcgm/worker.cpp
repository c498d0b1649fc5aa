#include "dcgm/worker.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>

namespace jobtrail::dcgm {

struct Worker::State {
    std::mutex mu;
    std::condition_variable cv;
    std::function<void()> job;
    bool has_job = false, running = false, quit = false;
    uint64_t done = 0;  // calls finished
};

void Worker::loop(const std::shared_ptr<Worker::State>& s) {
    std::unique_lock lock(s->mu);
    for (;;) {
        s->cv.wait(lock, [&] { return s->has_job || s->quit; });
        if (!s->has_job) return;
        auto job = std::move(s->job);
        s->has_job = false;
        s->running = true;
        lock.unlock();
        job();
        job = nullptr;  // the call's captures go with it, outside the lock
        lock.lock();
        s->running = false;
        ++s->done;
        s->cv.notify_all();
    }
}

Worker::Worker() : state_(std::make_shared<State>()) {
    std::thread([s = state_] { loop(s); }).detach();
}

Worker::~Worker() {
    std::lock_guard lock(state_->mu);
    state_->quit = true;
    state_->cv.notify_all();
}

bool Worker::run(std::function<void()> call, int timeout_ms) {
    std::unique_lock lock(state_->mu);
    if (state_->running || state_->has_job) return false;
    state_->job = std::move(call);
    state_->has_job = true;
    const uint64_t ticket = state_->done + 1;
    state_->cv.notify_all();
    return state_->cv.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return state_->done >= ticket; });
}

bool Worker::stuck() const {
    std::lock_guard lock(state_->mu);
    return state_->running || state_->has_job;
}

}  // namespace jobtrail::dcgm
