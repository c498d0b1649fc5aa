#include "shipper/sources/dcgm/handoff.hpp"

#include <algorithm>
#include <chrono>

namespace jobtrail::shipper::dcgm_source {

void Handoff::push_violation(dcgm::Event e) {
    std::lock_guard<std::mutex> lk(mu_);
    if (violations_.size() >= capacity_) {
        ++dropped_;
        return;
    }
    violations_.push_back(std::move(e));
}

void Handoff::push(Happening h) {
    std::lock_guard<std::mutex> lk(mu_);
    using W = Happening::What;
    if (h.what == W::kCheck && std::count_if(happenings_.begin(), happenings_.end(), [](const Happening& x) {
                                   return x.what == W::kCheck;
                               }) >= static_cast<std::ptrdiff_t>(kMaxChecks))
        happenings_.erase(std::find_if(happenings_.begin(), happenings_.end(),
                                       [](const Happening& x) { return x.what == W::kCheck; }));
    // The rest comes at most once per connection attempt (1 s apart at least): the bound is
    // for a pipeline that stopped polling, whose oldest news then matter least.
    if (happenings_.size() >= kMaxHappenings) happenings_.pop_front();
    happenings_.push_back(std::move(h));
}

std::vector<Happening> Handoff::take_happenings() {
    std::lock_guard<std::mutex> lk(mu_);
    std::vector<Happening> h(std::make_move_iterator(happenings_.begin()), std::make_move_iterator(happenings_.end()));
    happenings_.clear();
    return h;
}

void Handoff::take_violations(std::deque<dcgm::Event>& into) {
    std::lock_guard<std::mutex> lk(mu_);
    into.swap(violations_);
}

uint64_t Handoff::dropped() const {
    std::lock_guard<std::mutex> lk(mu_);
    return dropped_;
}

bool Handoff::wait_ms(int64_t ms) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait_for(lk, std::chrono::milliseconds(ms), [this] { return stop_; });
    return !stop_;
}

void Handoff::stop() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_.notify_all();
}

bool Handoff::stopping() const {
    std::lock_guard<std::mutex> lk(mu_);
    return stop_;
}

void Handoff::exited() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        exited_ = true;
    }
    cv_.notify_all();
}

bool Handoff::wait_exited_ms(int64_t ms) {
    std::unique_lock<std::mutex> lk(mu_);
    return cv_.wait_for(lk, std::chrono::milliseconds(ms), [this] { return exited_; });
}

}  // namespace jobtrail::shipper::dcgm_source
