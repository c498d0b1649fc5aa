#include "forensics/analysis.hpp"

#include <algorithm>

#include "common/text.hpp"
#include "common/time.hpp"
#include "devices/gpus.hpp"
#include "forensics/dcgm_lines.hpp"
#include "joblog/format.hpp"
#include "joblog/shipped.hpp"

namespace jobtrail::forensics {
namespace {

std::string_view short_line(std::string_view s) {
    return utf8_prefix(s, 300);
}

Finding finding(int64_t ts, const std::string& node, const std::string& source, std::string kind,
                events::Severity severity, std::string title, std::string action, std::string_view line) {
    Finding f;
    f.ts_ns = ts;
    f.node = node;
    f.source = source;
    f.kind = std::move(kind);
    f.severity = severity;
    f.title = std::move(title);
    f.action = std::move(action);
    f.quote = std::string(short_line(line));
    return f;
}

}  // namespace

Finding& Analyzer::group(const std::string& key, Finding proto, std::string* full_key) {
    // The same event before, during and after the job are three findings: the job's own Xid is
    // not hidden under an earlier one's time (and ranked as if it came before the job).
    if (when_) {
        proto.when = when_;
    } else if (facts_.job_start_ns && proto.ts_ns < facts_.job_start_ns) {
        proto.when = -1;
    } else if (facts_.job_end_ns && proto.ts_ns > facts_.job_end_ns) {
        proto.when = 1;
    }
    auto [it, fresh] = groups_.emplace(key + "|" + std::to_string(proto.when), proto);
    if (full_key) *full_key = it->first;
    Finding& f = it->second;
    if (!fresh && proto.ts_ns < f.ts_ns) {
        f.ts_ns = proto.ts_ns;
        f.quote = proto.quote;
    }
    ++f.count;
    return f;
}

void Analyzer::add(const std::string& node, const std::string& source, int64_t ts, std::string_view line, int when) {
    when_ = when;
    if (source == "kmsg") {
        const auto ev = extractor_.extract(line);
        if (!ev) return;
        Finding p = finding(ts, node, source, ev->kind, ev->severity,
                            (ev->xid ? (ev->kind == "sxid" ? "SXid " : "Xid ") + std::to_string(ev->xid) : ev->kind) +
                                (ev->pci_bdf.empty() ? "" : " on " + ev->pci_bdf) +
                                (ev->meaning.empty() ? "" : ": " + ev->meaning),
                            ev->action, line);
        p.xid = ev->xid;
        p.pci_bdf = ev->pci_bdf;
        std::string key;
        group(node + "|" + ev->kind + "|" + std::to_string(ev->xid) + "|" + ev->pci_bdf, p, &key);
        if (const std::string bdf = devices::bdf_key(ev->pci_bdf); ev->kind == "xid" && !bdf.empty()) {
            auto& seen = kernel_xids_[node + "|" + bdf + "|" + std::to_string(ev->xid)];
            if (seen.size() < kMaxSightings) seen.push_back({{ts, bdf}, key});
        }
        return;
    }
    if (source == "prolog" || source == "epilog") {
        const auto l = joblog::parse_shipped_line(line, source);
        const std::string_view tag = l.tag, name = l.name, text = l.text;
        if (tag == joblog::kMeta) {
            const std::string_view k = text.substr(0, text.find('='));
            const std::string v(text.substr(std::min(text.size(), k.size() + 1)));
            if (k == "user") facts_.user = v;
            if (k == "partition") facts_.partition = v;
            if (k == "nodelist") facts_.nodelist = v;
            if (k == "cluster") facts_.cluster = v;
        } else if (tag == joblog::kStatus) {
            const std::string_view st = logfmt_field(text, "status");
            if (!st.empty() && st != "0" && st != "skipped") {
                const Finding p = finding(
                    ts, node, source, "script-failure", events::Severity::kError,
                    source + " script " + std::string(name) + " failed: " + std::string(logfmt_field(text, "result")),
                    "read nodes/" + node + "/" + source + ".log; a failing " + source +
                        (source == "prolog" ? " fails the job and drains the node in Slurm"
                                            : " drains the node in Slurm"),
                    line);
                group(node + "|" + source + "|" + std::string(name), p);
            }
        } else if (tag == joblog::kDevice && source == "prolog" && name == "unresolved") {
            unresolved_.insert(node);
        } else if (tag == joblog::kDevice && source == "prolog" && name.empty()) {
            // kind=gpu index=1 bdf=0000:2a:00.0 serial=…: what Slurm gave the job on this node.
            const auto key = devices::bdf_key(logfmt_field(text, "bdf"));
            int index = -1;
            const auto idx = logfmt_field(text, "index");
            if (!key.empty() && !idx.empty() && idx.size() < 7 &&
                std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; }))
                index = std::stoi(std::string(idx));
            if (!key.empty() && index >= 0 && devices_[node].size() < 64) {
                node::JobDevice d{"gpu", index, std::string(utf8_prefix(logfmt_field(text, "bdf"), 32)), "",
                                  escape_line(utf8_prefix(logfmt_field(text, "serial"), 64))};
                devices_[node][key] = devices::describe(d);
            }
        } else if (tag == joblog::kEnd && source == "epilog") {
            facts_.exit_by_node[node] = std::string(logfmt_field(text, "status"));
        }
        return;
    }
    if (source == "nccl") {
        const bool warn = line.find(" NCCL WARN ") != std::string_view::npos;
        const bool abort = line.find("abort") != std::string_view::npos || line.find("Abort") != std::string_view::npos;
        if (!warn && !abort) return;
        const Finding p =
            finding(ts, node, source, abort ? "nccl-abort" : "nccl-warn",
                    abort ? events::Severity::kError : events::Severity::kWarning, abort ? "NCCL abort" : "NCCL WARN",
                    abort ? "the communicator was aborted: look for the first WARN and any Xid/mlx5 event before it"
                          : "NCCL warned; often the first sign of a network or peer failure",
                    line);
        group(node + "|" + p.kind, p);
        return;
    }
    if (source == "fabric-manager" &&
        (line.find("ERROR") != std::string_view::npos || line.find("error") != std::string_view::npos)) {
        const Finding p = finding(
            ts, node, source, "fm-error", events::Severity::kError, "fabric manager error",
            "NVSwitch fabric problem: check nvidia-fabricmanager status; GPUs may be unusable until it recovers", line);
        group(node + "|fm", p);
    }
}

void Analyzer::add_dcgm(const std::string& node, int64_t ts, std::string_view line, const loki::LabelSet* labels) {
    when_ = 0;
    const auto r = read_dcgm(line, labels);
    if (!r) return;  // archived, but no event
    const dcgm::Event& e = r->event;
    Finding p = finding(ts, node, "dcgm", "", r->severity, dcgm_title(*r), "", line);
    p.pci_bdf = r->bdf_key;
    const std::string gpu = std::to_string(e.gpu) + "|" + r->bdf_key;
    if (e.kind == dcgm::Kind::kXid) {
        const auto ev = events::xid_event(static_cast<int>(e.value), r->bdf_key, "dcgm-xid");
        p.kind = "xid";
        p.xid = static_cast<int>(e.value);
        p.title += ", seen by DCGM, not in the kernel ring";
        p.action = ev.action;
        std::string key;
        group(node + "|dcgm-xid|" + std::to_string(p.xid) + "|" + gpu, p, &key);
        auto& seen = dcgm_xids_[key];
        if (seen.size() < kMaxSightings) seen.push_back(ts);
        return;
    }
    p.kind = "dcgm-" + std::string(dcgm::kind_name(e.kind));
    switch (e.kind) {
        case dcgm::Kind::kDbe:
            p.action = events::xid_event(48, r->bdf_key, "dcgm-dbe").action;
            break;
        case dcgm::Kind::kPcie:
            p.action =
                "the GPU's PCIe link retries transfers: if the counter keeps rising, reseat or replace the riser";
            break;
        case dcgm::Kind::kRetiredPages:
            p.action = "the GPU reached its retired-pages limit: drain the node and have the GPU replaced";
            break;
        case dcgm::Kind::kThermal:
            p.action = "the GPU was throttled for heat (one slow rank slows the job): check the node's cooling";
            break;
        case dcgm::Kind::kPower:
            p.action = "the GPU was throttled for power: check its power cap and the node's power supplies";
            break;
        case dcgm::Kind::kNvlink:
            p.action = "NVLink errors: `nvidia-smi nvlink -e` and the fabric manager's log on the node";
            break;
        case dcgm::Kind::kHealth:
            p.action = e.cleared ? "" : "DCGM's health watch: `dcgmi health -c` on the node says more";
            break;
        case dcgm::Kind::kXid:
            break;
    }
    group(node + "|dcgm|" + std::string(dcgm::kind_name(e.kind)) + "|" + gpu + "|" + e.code + "|" +
              (e.cleared ? "cleared" : ""),
          p);
}

std::vector<Finding> Analyzer::findings() const {
    // A DCGM Xid sighting the kernel printed too is the kernel's finding, corroborated; the
    // others stay a DCGM finding of their own, counted and timed by what is left.
    std::map<std::string, Finding> groups = groups_;
    // Each kernel sighting as (time, its bdf key): a DCGM sighting finds its kernel line by time.
    std::map<std::string, std::vector<std::pair<int64_t, std::string>>> kernel;
    std::map<std::string, std::vector<std::string>> group_of;  // the same order: each one's group
    for (const auto& [k, seen] : kernel_xids_) {
        auto sorted = seen;
        std::sort(sorted.begin(), sorted.end());
        for (auto& [s, g] : sorted) {
            kernel[k].push_back(s);
            group_of[k].push_back(g);
        }
    }
    for (const auto& [key, times] : dcgm_xids_) {
        Finding& d = groups.at(key);
        const std::string kkey = d.node + "|" + d.pci_bdf + "|" + std::to_string(d.xid);
        const auto ks = kernel.find(kkey);
        uint64_t matched = 0;
        int64_t first_left = 0;
        for (const int64_t t : times) {
            if (ks != kernel.end()) {
                const auto hit = corroborating(ks->second.begin(), ks->second.end(), t, d.pci_bdf, d.xid);
                if (hit != ks->second.end()) {
                    groups.at(group_of[kkey][static_cast<size_t>(hit - ks->second.begin())]).dcgm = true;
                    ++matched;
                    continue;
                }
            }
            if (!first_left || t < first_left) first_left = t;
        }
        if (matched == d.count) {
            groups.erase(key);
        } else if (matched) {
            d.count -= matched;
            if (first_left) d.ts_ns = first_left;
        }
    }
    std::vector<Finding> out;
    out.reserve(groups.size());
    for (const auto& [k, f] : groups) {
        out.push_back(f);
        Finding& g = out.back();
        if (g.dcgm) g.title += ", corroborated by kernel and DCGM";
        if (g.when < 0) g.title += " (before the job started)";
        if (g.when > 0) g.title += " (after the job ended)";
        if ((g.source != "kmsg" && g.source != "dcgm") || g.pci_bdf.empty()) continue;
        const auto node = devices_.find(g.node);
        if (node == devices_.end()) continue;  // the job's devices there are not known
        const auto dev = node->second.find(devices::bdf_key(g.pci_bdf));
        // With some of the job's devices unresolved there, an unmatched one may be its own.
        if (dev == node->second.end() && unresolved_.count(g.node)) continue;
        g.own_device = dev != node->second.end() ? 1 : 0;
        g.title += dev != node->second.end() ? ", on this job's " + dev->second
                                             : " (not this job's device: another job's, or the node's)";
    }
    std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
        return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.node < b.node;
    });
    return out;
}

const Finding* Analyzer::likely_cause(const std::vector<Finding>& sorted) const {
    // Events known to be on another job's device come after everything else, at any severity.
    // At one severity, the job's own time before its margin: a GPU that fell off the bus before
    // the job started still outranks a warning during it.
    for (const bool others : {false, true})
        for (const auto sev : {events::Severity::kFatal, events::Severity::kError, events::Severity::kWarning})
            for (const bool outside : {false, true})
                for (const auto& f : sorted)
                    if (f.severity == sev && (f.own_device != 0) != others && (f.when != 0) == outside) return &f;
    return nullptr;
}

std::string Analyzer::summary_text() const {
    const auto fs = findings();
    std::string s;
    const auto& j = facts_;
    // Everything but the layout comes from Loki's answer, and the summary goes to a terminal:
    // control characters are escaped.
    const auto e = [](std::string_view v) { return escape_line(v); };
    s += "jobtrail bundle summary for job " + e(j.job_id) + "\n";
    s += std::string(40, '=') + "\n";
    if (!j.cluster.empty()) s += "cluster:   " + e(j.cluster) + "\n";
    if (!j.user.empty()) s += "user:      " + e(j.user) + "\n";
    if (!j.partition.empty()) s += "partition: " + e(j.partition) + "\n";
    std::string nodes;
    for (const auto& n : j.nodes) nodes += (nodes.empty() ? "" : ",") + e(n);
    s += "nodes:     " + (nodes.empty() ? std::string("(none found)") : nodes) + "\n";
    if (j.start_ns) s += "window:    " + format_rfc3339_ns(j.start_ns) + " .. " + format_rfc3339_ns(j.end_ns) + "\n";
    for (const auto& [n, st] : j.exit_by_node) s += "epilog on " + e(n) + ": status=" + e(st) + "\n";

    s += "\nMOST LIKELY CAUSE\n-----------------\n";
    if (const Finding* c = likely_cause(fs)) {
        s += format_rfc3339_ns(c->ts_ns) + " " + e(c->node) + " [" + std::string(events::severity_name(c->severity)) +
             "] " + e(c->title) + "\n";
        if (!c->action.empty()) s += "  action: " + e(c->action) + "\n";
        s += "  first line: " + e(c->quote) + "\n";
    } else {
        s += "nothing recognised: no kernel or DCGM event, script failure or NCCL warning in the job's window\n";
    }
    s += "\nBY NODE\n-------\n";
    std::vector<std::string> all_nodes = j.nodes;
    for (const auto& f : fs)
        if (std::find(all_nodes.begin(), all_nodes.end(), f.node) == all_nodes.end()) all_nodes.push_back(f.node);
    for (const auto& n : all_nodes) {
        s += e(n) + ":\n";
        bool any = false;
        for (const auto& f : fs) {
            if (f.node != n) continue;
            any = true;
            s += "  " + format_rfc3339_ns(f.ts_ns) + " [" + std::string(events::severity_name(f.severity)) + "] " +
                 e(f.title) + (f.count > 1 ? " (x" + std::to_string(f.count) + ")" : "") + "\n";
            if (!f.action.empty()) s += "      action: " + e(f.action) + "\n";
            s += "      first: " + e(f.quote) + "\n";
        }
        if (!any) s += "  nothing recognised\n";
    }
    return s;
}

}  // namespace jobtrail::forensics
