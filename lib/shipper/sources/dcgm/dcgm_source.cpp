#include "shipper/sources/dcgm/dcgm_source.hpp"

#include "common/time.hpp"
#include "node/schema.hpp"

namespace jobtrail::shipper {

namespace {

constexpr int64_t kDropsSayEveryNs = 60'000'000'000;
constexpr size_t kGpusListed = 16;  // in the connected notice; the rest counted
// DCGM calls back as a violation happens, stamped with its field's sample time (seconds old at
// most): a time outside these bounds of its arrival is no true one, and Loki would refuse it
// (older than reject_old_samples_max_age, or past its 10 min creation grace period).
constexpr int64_t kTrustPastUs = 3'600'000'000;
constexpr int64_t kTrustFutureUs = 600'000'000;

std::string us_text(int64_t us) {
    return format_rfc3339_ns(us * 1000);
}

}  // namespace

DcgmSource::DcgmSource(DcgmConfig cfg, NodeInfo node, Metrics& m, Events events, std::shared_ptr<dcgm::Client> client,
                       dcgm_source::WorkerTiming timing)
    : cfg_(std::move(cfg)),
      dm_(m.group<DcgmMetrics>()),
      events_(std::move(events)),
      origin_(make_origin({{node::label::kCluster, node.cluster},
                           {node::label::kNode, node.node},
                           {node::label::kJob, cfg_.job},
                           {node::label::kServiceName, cfg_.job}},
                          {}, node::StreamKind::kDcgm)),
      client_(std::move(client)),
      handoff_(std::make_shared<dcgm_source::Handoff>(static_cast<size_t>(cfg_.queue_size))),
      timing_(timing) {}

DcgmSource::~DcgmSource() {
    handoff_->stop();
    if (!worker_.joinable()) return;
    // A call under way returns within the client's time bound, then the disconnect; a client
    // stuck past that keeps only what it shares with the thread (client, handoff) alive.
    if (handoff_->wait_exited_ms(2LL * cfg_.client.call_timeout_ms + 1000))
        worker_.join();
    else
        worker_.detach();
}

// {"incidents": [{gpu, code, system, health}...], "watching_us": the last time DCGM answered}
nlohmann::json DcgmSource::checkpoint() const {
    nlohmann::json j = {{"incidents", incidents_.to_json()}};
    if (watching_us_ > 0) j["watching_us"] = watching_us_;
    return j;
}

void DcgmSource::restore(const nlohmann::json& st) {
    if (!st.is_object()) return;
    if (const auto it = st.find("incidents"); it != st.end()) incidents_.from_json(*it);
    if (const auto it = st.find("watching_us"); it != st.end() && it->is_number_integer() && it->get<int64_t>() > 0)
        watching_us_ = it->get<int64_t>();
}

std::string DcgmSource::where() const {
    return cfg_.client.address.empty() ? "the local host engine" : cfg_.client.address;
}

void DcgmSource::emit(dcgm::Event e, std::vector<Event>& out) {
    // A time DCGM did not give (0), or one it cannot mean: when it arrived.
    const int64_t now_us = realtime_ns() / 1000;
    if (e.ts_us < now_us - kTrustPastUs || e.ts_us > now_us + kTrustFutureUs) e.ts_us = now_us;
    if (e.pci_bdf.empty())
        if (const auto it = bus_ids_.find(e.gpu); it != bus_ids_.end()) e.pci_bdf = it->second;
    same_ts_ = e.ts_us == last_ts_us_ ? same_ts_ + 1 : 0;
    last_ts_us_ = e.ts_us;
    Event ev;
    ev.ts_ns = e.ts_us * 1000 + same_ts_;
    ev.origin = origin_;
    ev.line = dcgm::format_line(e);
    ev.metadata = dcgm::metadata(e);
    ev.pci_bdf = std::move(e.pci_bdf);
    out.push_back(std::move(ev));
    ++dm_.events;
}

void DcgmSource::happened(dcgm_source::Happening& h, std::vector<Event>& out) {
    using W = dcgm_source::Happening::What;
    switch (h.what) {
        case W::kRegistered: {
            const auto& r = h.registered;
            bus_ids_.clear();
            std::string listed, undescribed;
            for (const auto& g : r.gpus) {
                bus_ids_[g.id] = g.pci_bdf;
                if (bus_ids_.size() <= kGpusListed)
                    listed += (listed.empty() ? "" : ", ") + std::to_string(g.id) + " " +
                              (g.problem.empty() ? g.pci_bdf : "(no bus id)");
                if (!g.problem.empty() && undescribed.size() < 4096)
                    undescribed += (undescribed.empty() ? "" : "; ") + g.problem;
            }
            if (!undescribed.empty())
                events_.emit(Severity::kWarning, name_, event::kDcgmGpuUndescribed,
                             "DCGM could not describe every GPU (" + undescribed +
                                 "): their events are shipped without a PCI address, so they name no job's GPU "
                                 "and go to the node's running jobs");
            if (r.gpus.size() > kGpusListed) listed += " and " + std::to_string(r.gpus.size() - kGpusListed) + " more";
            dm_.connected = 1;
            if (watching_us_ > 0 && watching_us_ < r.ts_us)
                events_.emit(Severity::kWarning, name_, event::kDcgmNotReplayed,
                             "violations DCGM raised between " + us_text(watching_us_) +
                                 " (the last answer recorded) and " + us_text(r.ts_us) +
                                 " (registered again) are not replayed by DCGM and were not shipped; its health "
                                 "incidents are checked again now");
            events_.emit(Severity::kInfo, name_, event::kDcgmConnected,
                         "connected to " + where() + " through " + r.library + ": " + std::to_string(r.gpus.size()) +
                             " GPUs" + (listed.empty() ? "" : " (" + listed + ")") +
                             "; registered for violations, health checks every " +
                             std::to_string(timing_.health_interval_ms / 1000) + " s");
            watching_us_ = r.ts_us;
            break;
        }
        case W::kCheck:
            for (auto& e : incidents_.apply(h.check, [this](unsigned gpu) {
                     const auto it = bus_ids_.find(gpu);
                     return it == bus_ids_.end() ? std::string() : it->second;
                 }))
                emit(std::move(e), out);
            watching_us_ = std::max(watching_us_, h.check.ts_us);
            break;
        case W::kConnectFailed:
            ++dm_.connect_failures;
            dm_.connected = 0;
            if (h.first)
                events_.emit(Severity::kWarning, name_, event::kDcgmUnavailable,
                             "cannot use DCGM (" + where() + "): " + h.error +
                                 "; no DCGM events are shipped until it can; retrying after 1 s, doubling to 60 s "
                                 "(the other sources are not affected)");
            break;
        case W::kLost:
            dm_.connected = 0;
            events_.emit(
                Severity::kWarning, name_, event::kDcgmLost,
                "lost DCGM's host engine (" + where() + "): " + h.error + "; connecting and registering again");
            break;
    }
}

void DcgmSource::say_drops() {
    const uint64_t dropped = handoff_->dropped();
    if (dropped > drops_seen_) {
        dm_.queue_drops += dropped - drops_seen_;
        drops_seen_ = dropped;
    }
    const int64_t now = monotonic_ns();
    if (drops_seen_ == drops_said_ || (drops_said_ns_ && now - drops_said_ns_ < kDropsSayEveryNs)) return;
    events_.emit(Severity::kWarning, name_, event::kDcgmQueueFull,
                 std::to_string(drops_seen_ - drops_said_) + " DCGM violations dropped: the queue of " +
                     std::to_string(cfg_.queue_size) +
                     " waiting for the shipper was full (shipper.sources.dcgm.queue_size; said at most once a minute)");
    drops_said_ = drops_seen_;
    drops_said_ns_ = now;
}

bool DcgmSource::poll(std::vector<Event>& out, size_t max_bytes) {
    // Started after restore(): the first check is judged against the restored incidents.
    if (!worker_.joinable()) worker_ = std::thread(dcgm_source::run_worker, client_, handoff_, timing_);
    for (auto& h : handoff_->take_happenings()) happened(h, out);
    if (violations_.empty()) handoff_->take_violations(violations_);
    size_t bytes = 0;
    while (!violations_.empty() && bytes < max_bytes) {
        emit(std::move(violations_.front()), out);
        violations_.pop_front();
        bytes += out.back().line.size() + 128;  // with its metadata
    }
    say_drops();
    return !violations_.empty();
}

void DcgmKind::declare_metrics(metrics::Registry& m) {
    m.group<DcgmMetrics>();
}

void DcgmKind::build(const SourceContext& c, const Config& d, Sources& out) {
    if (!d.enabled) return;
    out.push_back(std::make_unique<DcgmSource>(d, c.node, c.metrics, c.events, dcgm::make_client(d.client),
                                               dcgm_source::WorkerTiming{d.health_interval_ms}));
}

}  // namespace jobtrail::shipper
