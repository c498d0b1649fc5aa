#include "shipper/sources/kmsg/kmsg_source.hpp"

#include <charconv>

#include "common/text.hpp"
#include "common/time.hpp"
#include "node/schema.hpp"

namespace jobtrail::shipper {

KmsgSource::KmsgSource(std::string path, const kmsg::BootClock& clock, NodeInfo node, Metrics& m, Events events)
    : path_(std::move(path)),
      clock_(clock),
      node_(std::move(node)),
      m_(m.group<KmsgMetrics>()),
      drops_(m.group<Drops>()),
      events_(std::move(events)) {}

// {"boot_id": ..., "seq": last shipped}: only meaningful on the same boot.
void KmsgSource::restore(const nlohmann::json& st) {
    if (!st.is_object() || !st.contains("boot_id") || !st.contains("seq") || !st["seq"].is_number_unsigned()) return;
    if (!st["boot_id"].is_string() || st["boot_id"].get<std::string>() != clock_.boot_id()) return;
    skip_through_ = last_seq_ = st["seq"].get<uint64_t>();
    have_skip_ = have_last_ = true;
}

nlohmann::json KmsgSource::checkpoint() const {
    if (!have_last_) return nlohmann::json::object();
    return {{"boot_id", clock_.boot_id()}, {"seq", last_seq_}};
}

const std::shared_ptr<const Origin>& KmsgSource::origin(int level) {
    auto& o = origins_[static_cast<size_t>(level & 7)];
    if (!o)
        o = make_origin({{node::label::kCluster, node_.cluster},
                         {node::label::kNode, node_.node},
                         {node::label::kJob, node::Schema::defaults().job(node::StreamKind::kKernel)},
                         {node::label::kPriority, kmsg::level_name(static_cast<uint8_t>(level & 7))},
                         {node::label::kServiceName, node::Schema::defaults().job(node::StreamKind::kKernel)}},
                        {}, node::StreamKind::kKernel);
    return o;
}

Status KmsgSource::open_reader() {
    Status st = reader_.open(path_, true);
    if (st.ok) st = reader_.seek_start();
    if (!st.ok) {
        reader_.close();
        // Retried every pass; said once until it works again.
        if (!open_failed_)
            events_.emit(Severity::kError, name_, event::kOpenFailed, "cannot read " + path_ + ": " + st.error);
        open_failed_ = true;
        return st;
    }
    if (open_failed_) events_.emit(Severity::kInfo, name_, event::kOpened, "reading " + path_ + " again");
    open_failed_ = false;
    return st;
}

void KmsgSource::emit(const kmsg::Record& r, std::vector<Event>& out) {
    Event e;
    e.ts_ns = clock_.record_ns(r.usec, r.seq);
    e.origin = origin(r.level);
    e.line = escape_line(r.message);
    e.kernel_facility = r.facility == 0;
    e.metadata.emplace_back(node::metadata::kSeq, std::to_string(r.seq));
    if (auto v = r.dict_value("SUBSYSTEM"); !v.empty())
        e.metadata.emplace_back(node::metadata::kSubsystem, std::string(v));
    if (auto v = r.dict_value("DEVICE"); !v.empty()) e.metadata.emplace_back(node::metadata::kDevice, std::string(v));
    if (auto ev = extractor_.extract(r)) {
        if (ev->xid)
            e.metadata.emplace_back(ev->kind == "sxid" ? node::metadata::kSxid : node::metadata::kXid,
                                    std::to_string(ev->xid));
        if (!ev->pci_bdf.empty()) e.metadata.emplace_back(node::metadata::kPciBdf, ev->pci_bdf);
        e.pci_bdf = std::move(ev->pci_bdf);
        e.metadata.emplace_back(node::metadata::kEvent, ev->kind);
        e.metadata.emplace_back(node::metadata::kSeverity, std::string(events::severity_name(ev->severity)));
    }
    out.push_back(std::move(e));
}

bool KmsgSource::poll(std::vector<Event>& out, size_t max_bytes) {
    if (!reader_.is_open()) {
        if (!open_reader().ok) return false;
        if (have_skip_) reader_.expect_seq(skip_through_ + 1);
    }
    size_t bytes = 0;
    std::vector<kmsg::Record> done;
    // A begun line (c) is read on to its next record even past the budget: cut there, its
    // continuation (+) would come as a line of its own. The kernel's ring bounds it.
    while (bytes < max_bytes || merger_.pending()) {
        const auto st = reader_.next();
        if (st == kmsg::Reader::Status::kWouldBlock) {
            merger_.flush(done);  // a lone fragment would otherwise wait for the next record
            for (auto& r : done) emit(r, out);
            return false;
        }
        if (st == kmsg::Reader::Status::kError) {
            // Opened again at the next pass, and read on after the last record taken: a new
            // descriptor starts at the ring's oldest record, which was shipped already.
            if (!open_failed_)
                events_.emit(Severity::kError, name_, event::kReadFailed, reader_.error() + ": opening it again");
            open_failed_ = true;
            if (have_last_) {
                skip_through_ = last_seq_;
                have_skip_ = true;
            }
            reader_.close();
            return false;
        }
        if (st == kmsg::Reader::Status::kLost) {
            Event e;
            e.ts_ns = realtime_ns();
            e.origin = origin(4);  // warning
            e.line = "jobtrail: " + std::to_string(reader_.lost()) + " kernel records lost (" +
                     (reader_.overrun() ? "ring buffer overrun" : "sequence gap") + ")";
            m_.lost += reader_.lost();
            out.push_back(std::move(e));
            continue;
        }
        const uint64_t seq = reader_.seq();
        if (have_skip_ && seq <= skip_through_) continue;  // shipped before the restart
        kmsg::Record r;
        kmsg::ParseError perr;
        if (!kmsg::parse_record(reader_.raw(), r, perr)) {
            drops_("kmsg_unparsable");
            continue;
        }
        bytes += r.message.size() + 64;
        last_seq_ = seq;
        have_last_ = true;
        merger_.push(std::move(r), done);
        for (auto& d : done) emit(d, out);
        done.clear();
    }
    // The position is about to be committed up to last_seq_: nothing may stay held back.
    merger_.flush(done);
    for (auto& r : done) emit(r, out);
    return true;
}

void KmsgSource::flush_partial(std::vector<Event>& out) {
    std::vector<kmsg::Record> done;
    merger_.flush(done);
    for (auto& r : done) emit(r, out);
}

void KmsgKind::declare_metrics(metrics::Registry& m) {
    m.group<KmsgMetrics>();
}

void KmsgKind::build(const SourceContext& c, const Config& k, Sources& out) {
    if (k.enabled)
        out.push_back(std::make_unique<KmsgSource>(c.cfg.collector.kmsg_path, c.clock, c.node, c.metrics, c.events));
}

}  // namespace jobtrail::shipper
