#pragma once

#include <functional>
#include <memory>

// The one thread that makes a client's DCGM calls, so that each call has a time bound: the caller
// waits at most the bound; a call past it is abandoned, still running on the worker, which takes
// no other call until it returns (DCGM's calls on one handle are not known to be safe while one
// is stuck). Destruction never waits for a running call: the thread finishes it and exits.
namespace jobtrail::dcgm {

class Worker {
public:
    Worker();
    ~Worker();
    Worker(const Worker&) = delete;
    Worker& operator=(const Worker&) = delete;

    // Runs `call` on the worker. True when it returned within timeout_ms; false when it did not
    // (it is abandoned) or when an abandoned call is still running (`call` is then not run). What
    // `call` writes must be its own (captured by value): an abandoned call outlives the caller.
    bool run(std::function<void()> call, int timeout_ms);
    // An abandoned call is still running.
    bool stuck() const;

private:
    struct State;
    static void loop(const std::shared_ptr<State>& s);
    std::shared_ptr<State> state_;
};

}  // namespace jobtrail::dcgm
