#include "shipper/sender.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <random>
#include <string_view>
#include <utility>

#include "common/time.hpp"

namespace jobtrail::shipper {

Sender::Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events, Lane lane)
    : Sender(cfg, spool, m, std::move(events), nullptr, lane) {
    auto once = std::make_shared<std::once_flag>();
    make_ = [this, once]() -> std::unique_ptr<loki::PushTransport> {
        auto c = std::make_unique<loki::Client>(config::loki_endpoint(cfg_));
        if (auto st = c->load_secrets(); !st.ok)
            std::call_once(*once, [&] {
                events_.emit(Severity::kError, "sender", event::kCredentialsUnreadable,
                             st.error + " (pushing without those credentials)");
            });
        return c;
    };
}

Sender::Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events, TransportFactory make,
               Lane lane)
    : cfg_(cfg),
      spool_(spool),
      m_(m.group<SenderMetrics>()),
      drops_(m.group<Drops>()),
      lanes_m_(m.group<LaneMetrics>()),
      events_(std::move(events)),
      make_(std::move(make)),
      lane_(lane),
      max_in_flight_(std::max<size_t>(1, cfg.max_in_flight)),
      policy_(cfg, std::random_device{}()) {}

Sender::~Sender() {
    stop_workers();
}

void Sender::start_workers() {
    quit_ = false;
    for (size_t i = 0; i < max_in_flight_; ++i) workers_.emplace_back([this] { worker(); });
}

void Sender::stop_workers() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        quit_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_) t.join();  // a request in flight ends within the client's timeout
    workers_.clear();
}

void Sender::worker() {
    const auto transport = make_();
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
        work_cv_.wait(lk, [&] { return quit_ || !todo_.empty(); });
        if (quit_) return;
        Job job = std::move(todo_.front());
        todo_.pop_front();
        lk.unlock();
        job.result = transport->push(std::string_view(job.body.data(), job.body_size));
        lk.lock();
        done_.push_back(std::move(job));
        done_cv_.notify_one();
    }
}

void Sender::dispatch(int64_t now) {
    for (auto& [name, s] : streams_) {
        if (in_flight_ >= max_in_flight_) return;
        if (s.in_flight || s.queue.empty() || s.policy.next_try_ns > now) continue;
        const uint64_t cap = policy_.request_cap(s.policy, now);
        Job job{name, {}, 0, {}};
        if (!spare_bodies_.empty()) {
            job.body = std::move(spare_bodies_.back());
            spare_bodies_.pop_back();
        }
        if (!build(name, s, cap, job)) {
            spare_bodies_.push_back(std::move(job.body));
            continue;
        }
        s.in_flight = true;
        ++in_flight_;
        {
            std::lock_guard<std::mutex> lk(mu_);
            todo_.push_back(std::move(job));
        }
        work_cv_.notify_one();
    }
}

// Applies the policy's decision on Loki's answer: counts, logs, and moves the stream on.
void Sender::handle(const Job& job) {
    auto& s = streams_.find(job.stream)->second;
    s.in_flight = false;
    --in_flight_;
    ++m_.pushes;
    const auto& res = job.result;
    const int64_t now = monotonic_ns();
    const auto v = loki::classify_push_response(res.status, res.body);
    auto d = policy_.decide(s.policy, job.stream, s.sent, v, res.error, now);
    if (d.retry) ++m_.retries;
    if (d.counts_rejected()) {
        std::map<std::string, uint64_t> by_reason;
        d.count_rejected(by_reason);
        for (const auto& [reason, n] : by_reason) m_.rejected.add({reason}, n);
    }
    if (d.outage_since_ns)
        // Loki is back: the shipper's own warnings (and every stream the outage held) go now,
        // not after the backoff each grew meanwhile (measured: 80 s after Loki came back).
        for (auto& [name, other] : streams_) ResponsePolicy::recovered(other.policy, d.outage_since_ns, now);
    if (d.stored()) {
        m_.sent += d.stored_entries;
        m_.sent_bytes += d.stored_bytes;
        const int64_t now_ns = realtime_ns();
        m_.last_success = now_ns;
        m_.lane_last_success.set({std::string(lane_name(lane_))}, now_ns);
    }
    if (d.stream_rate_limit) m_.loki_limit.set({"per_stream"}, static_cast<int64_t>(d.stream_rate_limit));
    if (d.tenant_rate_limit) m_.loki_limit.set({"tenant"}, static_cast<int64_t>(d.tenant_rate_limit));
    if (d.say) events_.emit(d.say->severity, "sender", d.say->event, std::move(d.say->text));
    if (d.settles()) settle(s);
}

void Sender::run(const std::atomic<bool>& stop) {
    acked_ = spool_.acked();
    start_workers();
    while (!stop) {
        const bool read = fill_window();
        forget_idle(monotonic_ns());
        ack_done();  // batches that were all too old
        busy_ = !window_.empty();
        if (window_.empty() && !read) {
            // Drained: what Loki acknowledged goes to disk now, not at the next ack (which on a
            // quiet node may come hours later, when Loki no longer drops a re-sent line).
            if (auto st = spool_.flush_ack(); !st.ok)
                events_.emit(Severity::kWarning, "sender", event::kAckFailed, "spool: " + st.error);
            if (spool_.wait_readable(0, stop)) {
                // Readable, yet nothing was read (a segment it cannot open): retry after
                // max_wait, not in a spin.
                for (int64_t t = 0; t < cfg_.batch_wait_ms && !stop; t += 50)
                    std::this_thread::sleep_for(std::chrono::milliseconds(50));
            } else {
                // Woken by the records' commit itself: a line on a quiet node goes out at once.
                spool_.wait_readable(cfg_.batch_wait_ms, stop);
            }
            continue;
        }
        dispatch(monotonic_ns());
        std::deque<Job> done;
        {
            std::unique_lock<std::mutex> lk(mu_);
            done_cv_.wait_for(lk, std::chrono::milliseconds(50), [&] { return !done_.empty() || stop; });
            done.swap(done_);
        }
        for (auto& job : done) {
            handle(job);
            if (spare_bodies_.size() < max_in_flight_) spare_bodies_.push_back(std::move(job.body));
        }
        ack_done();
    }
    stop_workers();
    // Pushes answered while stopping are acknowledged all the same: the lines Loki stored are
    // not sent again at the next start (each would cost the tenant's rate, and lean on Loki's
    // de-duplication to be stored once).
    for (auto& job : done_) handle(job);
    ack_done();
    // Whatever was not answered for stays in the spool; read it again from the acknowledged point.
    todo_.clear();
    done_.clear();
    window_.clear();
    window_bytes_ = 0;
    streams_.clear();
    in_flight_ = 0;
    spool_.rewind();
    busy_ = false;
}

}  // namespace jobtrail::shipper
