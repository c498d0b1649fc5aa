#pragma once

#include <deque>
#include <mutex>
#include <string>

#include "shipper/pipeline_metrics.hpp"
#include "shipper/sender/metrics.hpp"
#include "shipper/sources/kmsg/metrics.hpp"
#include "shipper/sources/source.hpp"

namespace jobtrail::shipper {

// The shipper's own stream, {job="jobtrail-shipper"}: a heartbeat every `interval` (what the
// "shipper stopped sending" alert looks for) and the shipper's warnings (spool full, entries
// Loki rejected), so they sit in Loki next to the logs they concern. Nothing here is replayed
// after a crash: these lines are also on stderr.
class SelfSource : public Source {
public:
    SelfSource(NodeInfo node, Metrics& m, int64_t interval_ms);
    const std::string& name() const override { return name_; }
    node::StreamKind kind() const override { return node::StreamKind::kShipper; }
    bool poll(std::vector<Event>& out, size_t max_bytes) override;
    nlohmann::json checkpoint() const override { return nlohmann::json::object(); }
    void restore(const nlohmann::json&) override {}
    // Thread-safe: the sender thread reports too. Bounded (10 a minute); the excess is counted.
    void note(const std::string& line);

private:
    std::string name_ = "self";
    std::shared_ptr<const Origin> origin_;
    // The heartbeat says the main counters.
    const PipelineMetrics& pipeline_m_;
    const SenderMetrics& sender_m_;
    const KmsgMetrics& kmsg_m_;
    int64_t interval_ns_;
    int64_t next_ns_ = 0;
    std::mutex mu_;
    std::deque<std::pair<int64_t, std::string>> notes_;
    uint64_t notes_dropped_ = 0;
    int64_t window_start_ns_ = 0;
    int in_window_ = 0;
};

}  // namespace jobtrail::shipper
