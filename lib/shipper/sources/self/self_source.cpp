#include "shipper/sources/self/self_source.hpp"

#include "common/time.hpp"
#include "jobtrail/version.hpp"

namespace jobtrail::shipper {

SelfSource::SelfSource(NodeInfo node, Metrics& m, int64_t interval_ms)
    : origin_(make_origin({{node::label::kCluster, node.cluster},
                           {node::label::kNode, node.node},
                           {node::label::kJob, node::Schema::defaults().job(node::StreamKind::kShipper)},
                           {node::label::kServiceName, node::Schema::defaults().job(node::StreamKind::kShipper)}},
                          {}, node::StreamKind::kShipper)),
      pipeline_m_(m.group<PipelineMetrics>()),
      sender_m_(m.group<SenderMetrics>()),
      kmsg_m_(m.group<KmsgMetrics>()),
      interval_ns_(interval_ms * 1'000'000) {}

void SelfSource::note(const std::string& line) {
    // Loki refusing one of these lines must not produce another one about it, forever.
    if (line.find("job=\"jobtrail-shipper\"") != std::string::npos) return;
    const int64_t now = realtime_ns();
    std::lock_guard<std::mutex> lk(mu_);
    // At most 10 a minute: an outage is worth a few lines, not one per retry.
    if (now - window_start_ns_ > 60'000'000'000) {
        window_start_ns_ = now;
        in_window_ = 0;
    }
    if (notes_.size() >= 100 || ++in_window_ > 10) {
        ++notes_dropped_;
        return;
    }
    notes_.emplace_back(now, line);
}

bool SelfSource::poll(std::vector<Event>& out, size_t) {
    const int64_t now = realtime_ns();
    {
        std::lock_guard<std::mutex> lk(mu_);
        for (auto& [ts, line] : notes_) out.push_back({ts, origin_, std::move(line), {}, false});
        notes_.clear();
        if (notes_dropped_) {
            out.push_back(
                {now,
                 origin_,
                 "warning: " + std::to_string(notes_dropped_) + " notices not shipped (more than 10 a minute)",
                 {},
                 false});
            notes_dropped_ = 0;
        }
    }
    if (interval_ns_ > 0 && now >= next_ns_) {
        next_ns_ = now + interval_ns_;
        out.push_back(
            {now,
             origin_,
             "heartbeat version=" + std::string(kVersion) + " read=" + std::to_string(pipeline_m_.read.value()) +
                 " sent=" + std::to_string(sender_m_.sent.value()) +
                 " retries=" + std::to_string(sender_m_.retries.value()) + " spool_full=" +
                 std::to_string(pipeline_m_.spool_full.value()) + " kmsg_lost=" + std::to_string(kmsg_m_.lost.value()),
             {},
             false});
    }
    return false;
}

}  // namespace jobtrail::shipper
