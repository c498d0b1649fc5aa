#include "dcgm/event.hpp"

#include <re2/re2.h>

#include <array>
#include <charconv>

#include "common/text.hpp"
#include "events/extractor.hpp"
#include "node/schema.hpp"

namespace jobtrail::dcgm {
namespace {

constexpr std::array<std::string_view, kKinds> kNames = {"xid",     "ecc_dbe", "pcie_replay", "retired_pages",
                                                         "thermal", "power",   "nvlink",      "health"};

// A name that sits between the line's punctuation (a location, a system, a verdict, a code):
// kept to [A-Za-z0-9_], so no value DCGM sends can end the field early or start another.
std::string word(std::string_view s) {
    std::string out;
    for (const char c : s.substr(0, 64)) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
        out += ok ? c : '_';
    }
    return out.empty() ? "unknown" : out;
}

std::string text(std::string_view s) {
    return std::string(utf8_prefix(escape_line(s.substr(0, 4 * kMaxText)), kMaxText));
}

std::string gpu(const Event& e) {
    return "on GPU " + std::to_string(e.gpu);
}

template <class T>
bool number(const std::string& s, T& out) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

}  // namespace

std::string_view kind_name(Kind k) {
    return kNames[static_cast<size_t>(k)];
}

std::string format_line(const Event& e) {
    const std::string v = std::to_string(e.value), v2 = std::to_string(e.value2);
    switch (e.kind) {
        case Kind::kXid:
            return "XID " + v + " " + gpu(e);
        case Kind::kDbe:
            return "Double-bit ECC error " + gpu(e) + ": " + v + " errors in " + word(e.detail);
        case Kind::kPcie:
            return "PCIe replay errors " + gpu(e) + ": counter " + v;
        case Kind::kRetiredPages:
            return "Retired pages limit " + gpu(e) + ": " + v + " single-bit, " + v2 + " double-bit";
        case Kind::kThermal:
            return "Thermal violation " + gpu(e) + ": " + v + " C";
        case Kind::kPower:
            return "Power violation " + gpu(e) + ": " + v + " W";
        case Kind::kNvlink:
            return "NVLink errors " + gpu(e) + ": counter " + v + " (field " + v2 + ")";
        case Kind::kHealth:
            if (e.cleared) return word(e.code) + " " + gpu(e) + " (" + word(e.system) + ") cleared";
            return word(e.code) + " " + gpu(e) + " (" + word(e.system) + ", " + word(e.health) +
                   "): " + text(e.message);
    }
    return {};
}

std::optional<Event> parse_line(std::string_view line) {
    static const RE2 xid(R"(XID (\d+) on GPU (\d+))");
    static const RE2 dbe(R"(Double-bit ECC error on GPU (\d+): (-?\d+) errors in (\w+))");
    static const RE2 pcie(R"(PCIe replay errors on GPU (\d+): counter (-?\d+))");
    static const RE2 pages(R"(Retired pages limit on GPU (\d+): (-?\d+) single-bit, (-?\d+) double-bit)");
    static const RE2 thermal(R"(Thermal violation on GPU (\d+): (-?\d+) C)");
    static const RE2 power(R"(Power violation on GPU (\d+): (-?\d+) W)");
    static const RE2 nvlink(R"(NVLink errors on GPU (\d+): counter (-?\d+) \(field (-?\d+)\))");
    static const RE2 cleared(R"((DCGM_FR_\w+) on GPU (\d+) \((\w+)\) cleared)");
    static const RE2 health(R"((DCGM_FR_\w+) on GPU (\d+) \((\w+), (\w+)\): (.*))");
    const re2::StringPiece in(line.data(), line.size());
    Event e;
    std::string g, a, b, c, d;
    auto done = [&](Kind k) -> std::optional<Event> {
        e.kind = k;
        if (!number(g, e.gpu)) return std::nullopt;
        if (!a.empty() && !number(a, e.value)) return std::nullopt;
        if (!b.empty() && !number(b, e.value2)) return std::nullopt;
        return e;
    };
    if (RE2::FullMatch(in, xid, &a, &g)) return done(Kind::kXid);
    if (RE2::FullMatch(in, dbe, &g, &a, &e.detail)) return done(Kind::kDbe);
    if (RE2::FullMatch(in, pcie, &g, &a)) return done(Kind::kPcie);
    if (RE2::FullMatch(in, pages, &g, &a, &b)) return done(Kind::kRetiredPages);
    if (RE2::FullMatch(in, thermal, &g, &a)) return done(Kind::kThermal);
    if (RE2::FullMatch(in, power, &g, &a)) return done(Kind::kPower);
    if (RE2::FullMatch(in, nvlink, &g, &a, &b)) return done(Kind::kNvlink);
    if (RE2::FullMatch(in, cleared, &e.code, &g, &e.system)) {
        e.cleared = true;
        return done(Kind::kHealth);
    }
    if (RE2::FullMatch(in, health, &e.code, &g, &e.system, &e.health, &d)) {
        e.message = unescape_hex(d);
        return done(Kind::kHealth);
    }
    return std::nullopt;
}

events::Severity severity(const Event& e) {
    using S = events::Severity;
    switch (e.kind) {
        case Kind::kXid:
            return events::xid_event(static_cast<int>(e.value), e.pci_bdf, "dcgm-xid").severity;
        case Kind::kDbe:
            return events::xid_event(48, e.pci_bdf, "dcgm-dbe").severity;
        case Kind::kRetiredPages:
        case Kind::kNvlink:
            return S::kError;
        case Kind::kPcie:
        case Kind::kThermal:
        case Kind::kPower:
            return S::kWarning;
        case Kind::kHealth:
            if (e.cleared) return S::kInfo;
            return e.health == "fail" ? S::kError : S::kWarning;
    }
    return S::kWarning;
}

std::vector<std::pair<std::string, std::string>> metadata(const Event& e) {
    namespace m = node::metadata;
    std::vector<std::pair<std::string, std::string>> out;
    out.emplace_back(m::kGpu, std::to_string(e.gpu));
    if (!e.pci_bdf.empty()) out.emplace_back(m::kPciBdf, text(e.pci_bdf));
    out.emplace_back(m::kEvent, std::string(kind_name(e.kind)));
    if (e.kind == Kind::kXid) out.emplace_back(m::kXid, std::to_string(e.value));
    out.emplace_back(m::kSeverity, std::string(events::severity_name(severity(e))));
    return out;
}

}  // namespace jobtrail::dcgm
