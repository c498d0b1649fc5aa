#include "collector/kernel_ring.hpp"

#include "common/text.hpp"
#include "common/time.hpp"
#include "kmsg/reader.hpp"

namespace jobtrail::collector {

RingScan scan_ring(const std::string& path, int64_t budget_ms,
                   const std::function<void(std::string_view, uint64_t)>& on_record,
                   const std::function<void(uint64_t)>& on_lost) {
    RingScan res;
    kmsg::Reader reader;
    Status opened = reader.open(path, /*non_blocking=*/true);
    if (opened.ok) opened = reader.seek_start();
    if (!opened.ok) {
        res.ok = false;
        res.error = opened.error;
        return res;
    }
    const int64_t deadline = monotonic_ns() + budget_ms * 1'000'000;
    for (;;) {
        // Checking the clock every record would cost more than the read; every 256 is plenty.
        if ((res.records & 0xff) == 0 && monotonic_ns() > deadline) {
            res.budget_exhausted = true;
            break;
        }
        const auto st = reader.next();
        if (st == kmsg::Reader::Status::kWouldBlock) break;
        if (st == kmsg::Reader::Status::kError) {
            res.ok = false;
            res.error = reader.error();
            break;
        }
        if (st == kmsg::Reader::Status::kLost) {
            res.lost += reader.lost();
            on_lost(reader.lost());
            continue;
        }
        ++res.records;
        res.any = true;
        res.last_seq = reader.seq();
        on_record(reader.raw(), reader.seq());
    }
    return res;
}

const events::Event* EventTally::add(const kmsg::Record& r, int64_t ts_ns) {
    auto ev = ex_.extract(r);
    if (!ev) return nullptr;
    for (auto& h : hits_) {
        if (h.event.kind == ev->kind && h.event.rule == ev->rule && h.event.xid == ev->xid &&
            h.event.pci_bdf == ev->pci_bdf) {
            ++h.count;
            return &h.event;
        }
    }
    // Bounded: a storm of distinct events must not grow memory without limit.
    if (hits_.size() >= 10'000) return nullptr;
    hits_.push_back({std::move(*ev), r.seq, ts_ns, r.message, 1});
    return &hits_.back().event;
}

uint64_t EventTally::count(events::Severity s) const {
    uint64_t n = 0;
    for (const auto& h : hits_)
        if (h.event.severity == s) n += h.count;
    return n;
}

std::string describe_hit(const EventHit& h) {
    const auto& e = h.event;
    std::string s = "severity=" + std::string(events::severity_name(e.severity)) + " kind=" + e.kind;
    if (e.xid) s += (e.kind == "sxid" ? " sxid=" : " xid=") + std::to_string(e.xid);
    if (!e.pci_bdf.empty()) s += " pci_bdf=" + logfmt_value(e.pci_bdf);
    s += " count=" + std::to_string(h.count) + " first_seq=" + std::to_string(h.first_seq) +
         " first_time=" + format_rfc3339_ns(h.first_ns) + " rule=" + e.rule;
    if (!e.meaning.empty()) s += " meaning=" + logfmt_value(e.meaning);
    if (!e.action.empty()) s += " action=" + logfmt_value(e.action);
    if (!e.detail.empty()) s += " detail=" + logfmt_value(e.detail);
    return s;
}

}  // namespace jobtrail::collector
