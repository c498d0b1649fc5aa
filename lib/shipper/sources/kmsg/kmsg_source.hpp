#pragma once

#include <array>
#include <memory>
#include <string>

#include "events/extractor.hpp"
#include "kmsg/boot_clock.hpp"
#include "kmsg/merge.hpp"
#include "kmsg/reader.hpp"
#include "shipper/sources/kmsg/config.hpp"
#include "shipper/sources/kmsg/metrics.hpp"
#include "shipper/sources/source.hpp"

namespace jobtrail::shipper {

// /dev/kmsg with exact resume: the last shipped sequence number is kept per boot, so a restart
// on the same boot continues after it and a reboot starts from the oldest record. An overrun
// becomes one "N kernel records lost" line. Timestamps come from the per-boot offset, so a
// re-read record gets the same nanoseconds.
class KmsgSource : public Source {
public:
    KmsgSource(std::string path, const kmsg::BootClock& clock, NodeInfo node, Metrics& m, Events events = {});
    const std::string& name() const override { return name_; }
    node::StreamKind kind() const override { return node::StreamKind::kKernel; }
    bool poll(std::vector<Event>& out, size_t max_bytes) override;
    nlohmann::json checkpoint() const override;
    void restore(const nlohmann::json& state) override;
    void flush_partial(std::vector<Event>& out) override;

private:
    Status open_reader();
    const std::shared_ptr<const Origin>& origin(int level);
    void emit(const kmsg::Record& r, std::vector<Event>& out);

    std::string name_ = "kmsg";
    std::string path_;
    const kmsg::BootClock& clock_;
    NodeInfo node_;
    KmsgMetrics& m_;
    Drops& drops_;
    Events events_;
    bool open_failed_ = false;                              // said once per failure, not once per pass
    std::array<std::shared_ptr<const Origin>, 8> origins_;  // one stream per priority
    kmsg::Reader reader_;
    kmsg::FragmentMerger merger_;
    events::Extractor extractor_;
    uint64_t skip_through_ = 0;  // resume: records up to this seq were shipped
    bool have_skip_ = false;
    uint64_t last_seq_ = 0;
    bool have_last_ = false;
};

}  // namespace jobtrail::shipper
