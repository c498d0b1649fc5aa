#include "events/extractor.hpp"

#include <re2/re2.h>

#include <charconv>
#include <map>

#include "events/rules.hpp"

namespace jobtrail::events {

struct Extractor::Compiled {
    const Rule* rule;
    RE2 re;
    int bdf = -1, xid = -1, detail = -1, comm = -1, pid = -1;

    explicit Compiled(const Rule& r) : rule(&r), re(re2::StringPiece(r.pattern.data(), r.pattern.size()), opts()) {
        const auto& groups = re.NamedCapturingGroups();
        auto idx = [&](const char* name) {
            auto it = groups.find(name);
            return it == groups.end() ? -1 : it->second;
        };
        bdf = idx("bdf");
        xid = idx("xid");
        detail = idx("detail");
        comm = idx("comm");
        pid = idx("pid");
    }

    static RE2::Options opts() {
        RE2::Options o;
        o.set_log_errors(false);
        o.set_encoding(RE2::Options::EncodingLatin1);  // kernel text may not be UTF-8
        return o;
    }
};

Extractor::Extractor() {
    for (const Rule& r : rules()) rules_.push_back(std::make_unique<Compiled>(r));
}

Extractor::~Extractor() = default;

namespace {

std::string group(const std::vector<re2::StringPiece>& m, int idx) {
    if (idx < 0 || static_cast<size_t>(idx) >= m.size() || m[static_cast<size_t>(idx)].data() == nullptr) return {};
    return std::string(m[static_cast<size_t>(idx)].data(), m[static_cast<size_t>(idx)].size());
}

// Xid 154 carries the action another Xid needs: "... to 0x1 (GPU Reset Required)".
std::string recovery_action(const std::string& detail) {
    static const RE2 re(R"(recovery action changed from .* to 0x[0-9a-fA-F]+ \(([^)]*)\))");
    std::string action;
    if (RE2::PartialMatch(detail, re, &action)) return action;
    return {};
}

void fill_from_xid(Event& e) {
    if (const XidInfo* info = find_xid(e.xid)) {
        if (e.meaning.empty()) e.meaning = std::string(info->mnemonic) + ": " + std::string(info->meaning);
        e.action = std::string(info->action) + " [NVIDIA: " + std::string(info->immediate) + "]";
        e.severity = info->severity;
    } else if (e.meaning.empty()) {
        e.meaning = "Xid " + std::to_string(e.xid) + " (not in jobtrail's catalogue)";
        e.action = "look it up in NVIDIA's Xid catalogue";
    }
    if (e.xid == 154) {
        const std::string act = recovery_action(e.detail);
        if (!act.empty()) {
            e.action = "recovery action required: " + act;
            e.severity = (act.find("None") != std::string::npos) ? Severity::kInfo : Severity::kFatal;
        }
    }
}

}  // namespace

Event xid_event(int xid, std::string pci_bdf, std::string rule) {
    Event e;
    e.kind = "xid";
    e.rule = std::move(rule);
    e.severity = Severity::kWarning;  // the kernel rule's, for a code not in the catalogue
    e.xid = xid;
    e.pci_bdf = std::move(pci_bdf);
    fill_from_xid(e);
    return e;
}

std::optional<Event> Extractor::extract(const kmsg::Record& record) const {
    constexpr uint8_t kKernelFacility = 0;
    if (record.facility != kKernelFacility) return std::nullopt;
    return extract(record.message);
}

std::optional<Event> Extractor::extract(std::string_view message) const {
    const re2::StringPiece text(message.data(), message.size());
    std::vector<re2::StringPiece> m;
    for (const auto& c : rules_) {
        const Rule& r = *c->rule;
        if (message.find(r.literal) == std::string_view::npos) continue;
        if (!c->re.ok()) continue;
        m.assign(static_cast<size_t>(c->re.NumberOfCapturingGroups()) + 1, re2::StringPiece());
        // Anchored here as well as by the patterns' '^': the kernel prints user-chosen text
        // (comm, binary path) after its own prefix, never before it.
        if (!c->re.Match(text, 0, text.size(), RE2::ANCHOR_START, m.data(), static_cast<int>(m.size()))) continue;
        Event e;
        e.kind = std::string(r.kind);
        e.rule = std::string(r.name);
        e.severity = r.severity;
        e.pci_bdf = group(m, c->bdf);
        e.detail = group(m, c->detail);
        const std::string comm = group(m, c->comm);
        const std::string pid = group(m, c->pid);
        if (!comm.empty()) e.detail = comm + "[" + pid + "]" + (e.detail.empty() ? "" : ": " + e.detail);
        e.meaning = std::string(r.meaning);
        e.action = std::string(r.action);
        if (const std::string code = group(m, c->xid); !code.empty()) {
            std::from_chars(code.data(), code.data() + code.size(), e.xid);
        }
        if (r.fixed_xid) e.xid = r.fixed_xid;
        if (e.kind == "xid") fill_from_xid(e);
        while (!e.detail.empty() && (e.detail.back() == ' ' || e.detail.back() == '.')) e.detail.pop_back();
        return e;
    }
    return std::nullopt;
}

}  // namespace jobtrail::events
