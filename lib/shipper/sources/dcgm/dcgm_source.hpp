#pragma once

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "dcgm/client.hpp"
#include "shipper/sources/dcgm/config.hpp"
#include "shipper/sources/dcgm/handoff.hpp"
#include "shipper/sources/dcgm/incidents.hpp"
#include "shipper/sources/dcgm/metrics.hpp"
#include "shipper/sources/dcgm/worker.hpp"
#include "shipper/sources/source.hpp"

namespace jobtrail::shipper {

// NVIDIA DCGM's policy violations and health incidents, one line each in {job="dcgm"}, stamped
// with DCGM's time (a nanosecond more for each event before it at the same microsecond, so
// identical events keep an entry each in Loki), with dcgm::metadata and the GPU's bus id for the
// stages' job attribution. All DCGM calls are on the source's own thread (worker.hpp), started
// by the first poll (after restore); DCGM's callbacks queue violations (handoff.hpp); poll()
// only drains what was handed over, so it never waits for DCGM. Health incidents are lines when
// they appear and clear (incidents.hpp). The checkpoint holds the active incidents and the last
// time DCGM answered: violations DCGM raised while nobody was registered are not replayed by
// DCGM, and the source says so, with both times, when it registers again.
class DcgmSource : public Source {
public:
    DcgmSource(DcgmConfig cfg, NodeInfo node, Metrics& m, Events events, std::shared_ptr<dcgm::Client> client,
               dcgm_source::WorkerTiming timing);
    ~DcgmSource() override;
    DcgmSource(const DcgmSource&) = delete;
    DcgmSource& operator=(const DcgmSource&) = delete;

    const std::string& name() const override { return name_; }
    node::StreamKind kind() const override { return node::StreamKind::kDcgm; }
    bool poll(std::vector<Event>& out, size_t max_bytes) override;
    nlohmann::json checkpoint() const override;
    void restore(const nlohmann::json& state) override;

private:
    void happened(dcgm_source::Happening& h, std::vector<Event>& out);
    void emit(dcgm::Event e, std::vector<Event>& out);
    void say_drops();
    std::string where() const;

    std::string name_ = "dcgm";
    DcgmConfig cfg_;
    DcgmMetrics& dm_;
    Events events_;
    std::shared_ptr<const Origin> origin_;
    std::shared_ptr<dcgm::Client> client_;
    std::shared_ptr<dcgm_source::Handoff> handoff_;
    dcgm_source::WorkerTiming timing_;
    std::thread worker_;
    std::deque<dcgm::Event> violations_;       // taken from the handoff, not yet polled out
    std::map<unsigned, std::string> bus_ids_;  // DCGM's GPU id -> its PCI bus id, as of the last registration
    dcgm_source::ActiveIncidents incidents_;
    int64_t watching_us_ = 0;  // the last time DCGM answered (a registration or a check); 0: never
    int64_t last_ts_us_ = -1;
    int64_t same_ts_ = 0;
    uint64_t drops_seen_ = 0, drops_said_ = 0;
    int64_t drops_said_ns_ = 0;
};

}  // namespace jobtrail::shipper
