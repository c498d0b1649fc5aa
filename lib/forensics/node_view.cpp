#include "forensics/node_view.hpp"

#include <algorithm>

#include "common/text.hpp"
#include "common/time.hpp"
#include "devices/gpus.hpp"
#include "forensics/dcgm_lines.hpp"
#include "joblog/format.hpp"

namespace jobtrail::forensics {
namespace {

std::string join(const std::vector<std::string>& v, const char* sep = ",") {
    std::string out;
    for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
    return out;
}

std::string title(const NodeEvent& n) {
    const events::Event& e = n.event;
    if (n.source == "dcgm") return "DCGM: " + e.meaning;
    std::string t = e.xid ? (e.kind == "sxid" ? "SXid " : "Xid ") + std::to_string(e.xid) : e.kind;
    if (!e.pci_bdf.empty()) t += " on " + e.pci_bdf;
    if (!e.meaning.empty()) t += ": " + e.meaning;
    return t;
}

}  // namespace

void NodeView::add_job_line(const std::string& job_id, std::string_view phase, int64_t ts, std::string_view tag,
                            std::string_view name, std::string_view text) {
    if (!node::valid_job_id(job_id)) return;
    auto it = jobs_.find(job_id);
    if (it == jobs_.end()) {
        if (jobs_.size() >= kMaxJobs) return;
        it = jobs_.emplace(job_id, NodeJob{job_id, {}, {}, 0, 0, {}, {}}).first;
    }
    NodeJob& j = it->second;
    if (phase == "prolog" && (!j.start_ns || ts < j.start_ns)) j.start_ns = ts;
    // What Loki returns is untrusted: printed only escaped.
    if (tag == joblog::kMeta && text.substr(0, 5) == "user=") j.user = escape_line(utf8_prefix(text.substr(5), 64));
    if (tag == joblog::kMeta && text.substr(0, 4) == "uid=" && text.size() <= 14 &&
        std::all_of(text.begin() + 4, text.end(), [](char c) { return c >= '0' && c <= '9'; }))
        j.uid = std::string(text.substr(4));
    if (phase == "prolog" && tag == joblog::kDevice) {
        if (name == "unresolved") {
            j.devices_note = escape_line(utf8_prefix(logfmt_field(text, "note"), 256));
        } else if (name.empty() && j.devices.size() < 64) {
            const auto bdf = logfmt_field(text, "bdf");
            const auto idx = logfmt_field(text, "index");
            if (!devices::bdf_key(bdf).empty() && !idx.empty() && idx.size() < 7 &&
                std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; })) {
                node::JobDevice d{"gpu",
                                  std::stoi(std::string(idx)),
                                  std::string(bdf),
                                  {},
                                  escape_line(utf8_prefix(logfmt_field(text, "serial"), 64))};
                if (std::none_of(j.devices.begin(), j.devices.end(),
                                 [&](const node::JobDevice& x) { return x.bdf == d.bdf; }))
                    j.devices.push_back(std::move(d));
            }
        }
    }
    if (phase == "epilog" && tag == joblog::kEnd) j.end_ns = std::max(j.end_ns, ts);
}

void NodeView::prepare() {
    if (prepared_) return;
    prepared_ = true;
    for (const auto& [id, j] : jobs_)
        if (j.start_ns) attributor_.upsert(id, j.uid, j.start_ns, j.end_ns, j.devices, j.devices_note);
}

NodeView::KernelUse NodeView::kernel_use(std::string_view message) const {
    if (extractor_.extract(message)) return KernelUse::kEvent;
    // Any oom-kill line is context, whoever's cgroup it names: it says whose the killed pid was,
    // or why it is no job's (the attributor judges that, against the configured roots).
    const auto k = devices::parse_oom_kill(message, {});
    return k.pid > 0 || !k.job_id.empty() || !k.refused.empty() ? KernelUse::kContext : KernelUse::kNone;
}

void NodeView::add_kernel(int64_t ts, std::string_view message) {
    prepare();
    const auto ev = extractor_.extract(message);
    const auto a = attributor_.attribute(ts, message, ev ? std::string_view(ev->pci_bdf) : std::string_view());
    if (!ev) return;
    NodeEvent e;
    e.ts_ns = ts;
    e.event = *ev;
    e.basis = std::string(devices::basis_name(a.basis));
    e.jobs = a.jobs();
    if (a.device) e.device = devices::describe(*a.device);
    e.note = a.note;
    e.line = escape_line(utf8_prefix(message, 300));
    push(std::move(e));
}

void NodeView::add_dcgm(int64_t ts, std::string_view line, const loki::LabelSet* labels) {
    prepare();
    const auto r = read_dcgm(line, labels);
    if (!r) return;
    NodeEvent e;
    e.ts_ns = ts;
    e.source = "dcgm";
    if (r->event.kind == dcgm::Kind::kXid) {
        e.event = events::xid_event(static_cast<int>(r->event.value), r->bdf_key, "dcgm-xid");
    } else {
        e.event.kind = "dcgm-" + std::string(dcgm::kind_name(r->event.kind));
        e.event.rule = "dcgm";
        e.event.severity = r->severity;
        e.event.pci_bdf = r->bdf_key;
    }
    e.event.meaning = dcgm_title(*r);
    const auto a = attributor_.attribute(ts, line, r->bdf_key);
    e.basis = std::string(devices::basis_name(a.basis));
    e.jobs = a.jobs();
    if (a.device) e.device = devices::describe(*a.device);
    e.note = a.note;
    e.line = escape_line(utf8_prefix(line, 300));
    push(std::move(e));
}

void NodeView::push(NodeEvent e) {
    if (events_.size() >= kMaxEvents) {
        events_.pop_front();
        ++dropped_;
    }
    events_.push_back(std::move(e));
}

std::string NodeView::text(int64_t from, int64_t to, const std::string& source) const {
    std::string s = "jobtrail node " + node_ + ": " + format_rfc3339_ns(from) + " .. " + format_rfc3339_ns(to) + " (" +
                    source + ")\n";
    s += "\nJOBS\n----\n";
    if (jobs_.empty()) s += "no job ran here in the window (no prolog or epilog records)\n";
    for (const auto& [id, j] : jobs_) {
        s += id + (j.user.empty() ? "" : " user=" + j.user) + " " +
             (j.start_ns ? format_rfc3339_ns(j.start_ns) : std::string("?")) + " .. " +
             (j.end_ns ? format_rfc3339_ns(j.end_ns) : std::string("(no epilog end)")) + "\n";
        for (const auto& d : j.devices) s += "    " + devices::describe(d) + "\n";
        if (j.devices.empty()) s += "    no GPU recorded\n";
        if (!j.devices_note.empty()) s += "    devices: " + j.devices_note + " (its device events count node-wide)\n";
    }
    s += "\nKERNEL AND DCGM EVENTS\n----------------------\n";
    if (events_.empty()) s += "none recognised\n";
    std::map<std::string, uint64_t> hits, node_hits;
    for (const auto& e : events_) {
        s += format_rfc3339_ns(e.ts_ns) + " [" + std::string(events::severity_name(e.event.severity)) + "] " +
             title(e) + "\n    ";
        if (e.basis == "device") {
            s += "hit job " + join(e.jobs) + ": its " + e.device;
        } else if (e.basis == "memcg") {
            s += "hit job " + join(e.jobs) + ": its memory cgroup";
        } else {
            s += e.jobs.empty() ? "node-wide, no job running" : "node-wide: jobs " + join(e.jobs);
            if (!e.note.empty()) s += " (" + e.note + ")";
        }
        s += "\n";
        for (const auto& id : e.jobs) ++(e.basis == "node" ? node_hits : hits)[id];
    }
    if (dropped_) s += "(" + std::to_string(dropped_) + " more events not listed: older ones)\n";
    if (not_looked_before_)
        s += "(the newest " + std::to_string(kMaxEvents) + " events or " + std::to_string(kMaxJobs) +
             " jobs filled the view: nothing before " + format_rfc3339_ns(not_looked_before_) + " was looked for)\n";
    s += "\nJOBS NOT HIT\n------------\n";
    bool any = false;
    for (const auto& [id, j] : jobs_) {
        if (hits.count(id)) continue;
        any = true;
        s += id + ": no event on its devices or memory cgroup" +
             (node_hits.count(id) ? " (" + std::to_string(node_hits[id]) + " node-wide)" : std::string()) + "\n";
    }
    if (!any) s += "none\n";
    return s;
}

nlohmann::json NodeView::json(int64_t from, int64_t to, const std::string& source) const {
    using nlohmann::json;
    json jobs = json::array();
    std::map<std::string, uint64_t> hits;
    for (const auto& e : events_)
        if (e.basis != "node")
            for (const auto& id : e.jobs) ++hits[id];
    for (const auto& [id, j] : jobs_) {
        json devs = json::array();
        for (const auto& d : j.devices)
            devs.push_back({{"kind", d.kind}, {"index", d.index}, {"bdf", d.bdf}, {"serial", d.serial}});
        jobs.push_back({{"job_id", id},
                        {"user", j.user},
                        {"start", j.start_ns ? format_rfc3339_ns(j.start_ns) : ""},
                        {"end", j.end_ns ? format_rfc3339_ns(j.end_ns) : ""},
                        {"devices", devs},
                        {"devices_note", j.devices_note},
                        {"hit", hits.count(id) > 0}});
    }
    json evs = json::array();
    for (const auto& e : events_)
        evs.push_back({{"time", format_rfc3339_ns(e.ts_ns)},
                       {"kind", e.event.kind},
                       {"xid", e.event.xid},
                       {"pci_bdf", e.event.pci_bdf},
                       {"severity", std::string(events::severity_name(e.event.severity))},
                       {"title", title(e)},
                       {"source", e.source},
                       {"attribution", e.basis},
                       {"jobs", e.jobs},
                       {"device", e.device},
                       {"note", e.note},
                       {"line", e.line}});
    json out = {{"node", node_},
                {"from", format_rfc3339_ns(from)},
                {"to", format_rfc3339_ns(to)},
                {"source", source},
                {"jobs", jobs},
                {"events", evs},
                {"events_not_listed", dropped_}};
    if (not_looked_before_) out["not_looked_before"] = format_rfc3339_ns(not_looked_before_);
    return out;
}

}  // namespace jobtrail::forensics
