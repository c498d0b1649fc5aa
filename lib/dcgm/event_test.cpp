#include "dcgm/event.hpp"

#include <catch2/catch.hpp>

#include "events/extractor.hpp"

using namespace jobtrail;
using dcgm::Kind;

namespace {

dcgm::Event ev(Kind k, int64_t v = 0, int64_t v2 = 0) {
    dcgm::Event e;
    e.kind = k;
    e.gpu = 3;
    e.value = v;
    e.value2 = v2;
    return e;
}

std::string meta(const dcgm::Event& e, const std::string& key) {
    for (const auto& [k, v] : dcgm::metadata(e))
        if (k == key) return v;
    return "<absent>";
}

}  // namespace

TEST_CASE("each DCGM event reads like DCGM's message and parses back", "[dcgm]") {
    dcgm::Event dbe = ev(Kind::kDbe, 2);
    dbe.detail = "device";
    dcgm::Event fired = ev(Kind::kHealth);
    fired.code = "DCGM_FR_VOLATILE_DBE_DETECTED";
    fired.system = "mem";
    fired.health = "fail";
    fired.message = "Detected 2 volatile double-bit ECC error(s) in GPU 3.";
    dcgm::Event cleared = fired;
    cleared.cleared = true;
    const std::vector<std::pair<dcgm::Event, std::string>> cases = {
        {ev(Kind::kXid, 79), "XID 79 on GPU 3"},
        {dbe, "Double-bit ECC error on GPU 3: 2 errors in device"},
        {ev(Kind::kPcie, 120), "PCIe replay errors on GPU 3: counter 120"},
        {ev(Kind::kRetiredPages, 0, 64), "Retired pages limit on GPU 3: 0 single-bit, 64 double-bit"},
        {ev(Kind::kThermal, 95), "Thermal violation on GPU 3: 95 C"},
        {ev(Kind::kPower, 720), "Power violation on GPU 3: 720 W"},
        {ev(Kind::kNvlink, 12, 449), "NVLink errors on GPU 3: counter 12 (field 449)"},
        {fired,
         "DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem, fail): Detected 2 volatile double-bit ECC error(s) in GPU 3."},
        {cleared, "DCGM_FR_VOLATILE_DBE_DETECTED on GPU 3 (mem) cleared"},
    };
    for (const auto& [e, line] : cases) {
        INFO(line);
        CHECK(dcgm::format_line(e) == line);
        const auto back = dcgm::parse_line(line);
        REQUIRE(back);
        CHECK(back->kind == e.kind);
        CHECK(back->gpu == 3);
        CHECK(back->value == e.value);
        CHECK(back->value2 == e.value2);
        CHECK(back->detail == e.detail);
        CHECK(back->code == e.code);
        CHECK(back->system == e.system);
        CHECK(back->cleared == e.cleared);
        CHECK(back->message == (e.cleared ? "" : e.message));
    }
    CHECK_FALSE(dcgm::parse_line("XID 79 on GPU 3 extra"));
    CHECK_FALSE(dcgm::parse_line("NVRM: Xid (PCI:0000:3b:00): 79, pid=1"));
    CHECK_FALSE(dcgm::parse_line("XID 99999999999999999999 on GPU 3"));
}

TEST_CASE("DCGM's texts cannot break the line or forge its fields", "[dcgm]") {
    dcgm::Event e = ev(Kind::kHealth);
    e.code = "DCGM_FR_X on GPU 0 (mem) cleared\n";
    e.system = "mem, fail): ";
    e.health = "fail";
    e.message = std::string("two\nlines\x01") + std::string(5000, 'm');
    const std::string line = dcgm::format_line(e);
    CHECK(line.find('\n') == std::string::npos);
    CHECK(line.find('\x01') == std::string::npos);
    CHECK(line.size() < 1200);
    const auto back = dcgm::parse_line(line);
    REQUIRE(back);
    CHECK(back->gpu == 3);
    CHECK_FALSE(back->cleared);
    CHECK(back->message.substr(0, 10) == "two\nlines\x01");
}

TEST_CASE("a DCGM name keeps its letters, digits and underscores, every other byte one underscore, 64 at most",
          "[dcgm]") {
    dcgm::Event e = ev(Kind::kHealth);
    e.cleared = true;
    // Each range's ends and the bytes just outside them.
    e.code = "DCGM_FR_azAZ09_`{@[/:\xff";
    e.system = std::string(70, 'm');
    const std::string line = dcgm::format_line(e);
    CHECK(line == "DCGM_FR_azAZ09________ on GPU 3 (" + std::string(64, 'm') + ") cleared");
    const auto back = dcgm::parse_line(line);
    REQUIRE(back);
    CHECK(back->code == "DCGM_FR_azAZ09________");
    e.code = "";
    CHECK(dcgm::format_line(e).starts_with("unknown on GPU 3"));
}

TEST_CASE("an Xid from DCGM gets the kernel's verdict for the same code", "[dcgm]") {
    const events::Extractor x;
    for (const int code : {13, 31, 48, 63, 79, 94, 95, 119, 4242}) {
        INFO(code);
        const auto kernel = x.extract("NVRM: Xid (PCI:0000:3b:00): " + std::to_string(code) + ", pid=1, name=x, text");
        REQUIRE(kernel);
        const auto e = ev(Kind::kXid, code);
        CHECK(meta(e, "severity") == events::severity_name(kernel->severity));
        CHECK(meta(e, "xid") == std::to_string(code));
        CHECK(meta(e, "event") == "xid");
    }
    CHECK(dcgm::severity(ev(Kind::kDbe, 1)) == events::xid_event(48, "", "").severity);
    dcgm::Event warn = ev(Kind::kHealth);
    warn.health = "warn";
    CHECK(dcgm::severity(warn) == events::Severity::kWarning);
    warn.cleared = true;
    CHECK(dcgm::severity(warn) == events::Severity::kInfo);
    CHECK(meta(ev(Kind::kThermal, 90), "xid") == "<absent>");
    CHECK(meta(ev(Kind::kThermal, 90), "pci_bdf") == "<absent>");
    CHECK(meta(ev(Kind::kThermal, 90), "gpu") == "3");
}
