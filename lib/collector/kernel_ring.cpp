#include "collector/kernel_ring.hpp"

#include <optional>

#include "common/text.hpp"
#include "common/time.hpp"
#include "devices/gpus.hpp"
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

namespace {

// Who an event concerns, from the job's point of view, in the words of the epilog summary.
void say_owner(EventHit& h, const devices::Attribution& a, const std::string& self) {
    const auto& e = h.event;
    if (a.basis == devices::Basis::kNode) {
        h.owner = "node";
        h.attribution = a.note.empty() ? "node-wide: every job on the node then"
                                       : "node-wide: " + a.note + ", so every job on the node then";
        return;
    }
    h.owner_job = a.owner;
    h.owner = a.owner == self ? "this_job" : "other_job";
    if (a.basis == devices::Basis::kMemcg) {
        h.attribution = a.owner == self ? "in this job's memory cgroup" : "in job " + a.owner + "'s memory cgroup";
        return;
    }
    const std::string dev = a.device ? devices::describe(*a.device) : e.pci_bdf;
    h.attribution = a.owner == self ? "on " + dev + ", owned by this job"
                                    : "on " + dev + ", a GPU of another job (" + a.owner + ")";
}

// The owner part of the grouping key: "" without attribution, "node", or the job.
std::string owner_key(const EventHit& h) {
    return h.owner.empty() ? std::string() : (h.owner_job.empty() ? std::string("node") : h.owner_job);
}

}  // namespace

const events::Event* EventTally::add(const kmsg::Record& r, int64_t ts_ns) {
    auto ev = ex_.extract(r);
    std::optional<devices::Attribution> a;
    // Every record goes to the attributor (an oom-kill line is no event, but names the cgroup of
    // the kill that follows); only the kernel's own text is read for devices and cgroups.
    if (attributor_) {
        const bool kernel = r.facility == 0;
        a = attributor_->attribute(ts_ns, kernel ? std::string_view(r.message) : std::string_view(),
                                   (kernel && ev) ? std::string_view(ev->pci_bdf) : std::string_view());
    }
    if (!ev) return nullptr;
    const std::string owner = a ? (a->owner.empty() ? "node" : a->owner) : std::string();
    for (auto& h : hits_) {
        if (h.event.kind == ev->kind && h.event.rule == ev->rule && h.event.xid == ev->xid &&
            h.event.pci_bdf == ev->pci_bdf && owner_key(h) == owner) {
            ++h.count;
            return &h.event;
        }
    }
    // Bounded: a storm of distinct events must not grow memory without limit.
    if (hits_.size() >= 10'000) return nullptr;
    hits_.push_back({std::move(*ev), r.seq, ts_ns, r.message, 1, {}, {}, {}});
    if (a) say_owner(hits_.back(), *a, self_);
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
    if (!h.owner.empty()) {
        s += " owner=" + h.owner;
        if (!h.owner_job.empty()) s += " owner_job=" + h.owner_job;
        s += " attribution=" + logfmt_value(h.attribution);
    }
    return s;
}

}  // namespace jobtrail::collector
