#include "events/extractor.hpp"

#include <catch2/catch.hpp>

#include "events/rules.hpp"
#include "kmsg/record.hpp"

using namespace jobtrail::events;

namespace {
const Extractor& ex() {
    static const Extractor e;
    return e;
}
}  // namespace

TEST_CASE("Xid with PCI: prefix and quoted unknown pid", "[events]") {
    auto e =
        ex().extract("NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.");
    REQUIRE(e);
    CHECK(e->kind == "xid");
    CHECK(e->xid == 79);
    CHECK(e->pci_bdf == "0000:3b:00");
    CHECK(e->severity == Severity::kFatal);
    CHECK(e->meaning.find("GPU_HAS_FALLEN_OFF_THE_BUS") != std::string::npos);
    CHECK(e->action.find("RESTART_BM") != std::string::npos);
    CHECK(e->action.find("reboot") != std::string::npos);
}

TEST_CASE("Xid forms: N/A pid, bare pid, no PCI: prefix", "[events]") {
    auto a = ex().extract("NVRM: Xid (PCI:0000:65:00): 119, pid='N/A', Timeout waiting for RPC from GSP");
    REQUIRE(a);
    CHECK(a->xid == 119);
    CHECK(a->action.find("RESET_GPU") != std::string::npos);
    auto b = ex().extract(
        "NVRM: Xid (PCI:0000:10:1c): 63, pid=1896, Row Remapper: New row marked for remapping, reset gpu to activate.");
    REQUIRE(b);
    CHECK(b->xid == 63);
    CHECK(b->severity == Severity::kInfo);
    CHECK(b->pci_bdf == "0000:10:1c");
    auto c = ex().extract("NVRM: Xid (0000:03:00): 14, Channel 00000001");
    REQUIRE(c);
    CHECK(c->xid == 14);
    CHECK(c->pci_bdf == "0000:03:00");
    CHECK(c->meaning.find("not in") != std::string::npos);  // unknown code still reported
    auto d = ex().extract(
        "NVRM: Xid (PCI:0000:b7:00): 48, pid=2231, name=python, An uncorrectable double bit error (DBE) has been "
        "detected on GPU in the framebuffer at partition 2, subpartition 0.");
    REQUIRE(d);
    CHECK(d->xid == 48);
    CHECK(d->severity == Severity::kFatal);
    CHECK(d->meaning.find("Double-bit ECC") != std::string::npos);
}

TEST_CASE("Xid 79 printed without the word Xid", "[events]") {
    auto a = ex().extract("NVRM: GPU 0000:18:00.0: GPU has fallen off the bus.");
    REQUIRE(a);
    CHECK(a->xid == 79);
    CHECK(a->pci_bdf == "0000:18:00.0");
    CHECK(a->severity == Severity::kFatal);
    auto b = ex().extract(
        "NVRM: The NVIDIA GPU 0000:18:00.0 (PCI ID: 10de:2330) installed in this system has fallen off the bus and is "
        "not responding to commands.");
    REQUIRE(b);
    CHECK(b->xid == 79);
    CHECK(b->rule == "xid79-no-xid-word");
}

TEST_CASE("Xid 154 carries the recovery action", "[events]") {
    auto e = ex().extract(
        "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)");
    REQUIRE(e);
    CHECK(e->xid == 154);
    CHECK(e->action == "recovery action required: GPU Reset Required");
    CHECK(e->severity == Severity::kFatal);
    auto none = ex().extract(
        "NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)");
    REQUIRE(none);
    CHECK(none->severity == Severity::kInfo);
}

TEST_CASE("NVLink5 extended Xid", "[events]") {
    auto e = ex().extract(
        "NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 08 (0x004505c6 0x00000000 0x00000000)");
    REQUIRE(e);
    CHECK(e->xid == 149);
    CHECK(e->pci_bdf == "0018:01:00");
    CHECK(e->severity == Severity::kFatal);
}

TEST_CASE("mlx5 firmware, health, power and cable events", "[events]") {
    auto t = ex().extract(
        "mlx5_core 0000:3b:00.0: wait_func:1120:(pid 2041): ACCESS_REG(0x805) timeout. Will cause a leak of a command "
        "resource");
    REQUIRE(t);
    CHECK(t->rule == "mlx5-cmd-timeout");
    CHECK(t->pci_bdf == "0000:3b:00.0");
    CHECK(t->severity == Severity::kFatal);
    auto h = ex().extract(
        "mlx5_core 0000:5e:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count");
    REQUIRE(h);
    CHECK(h->rule == "mlx5-health");
    auto p = ex().extract(
        "mlx5_core 0000:5e:00.0: mlx5_pcie_event:299:(pid 10): Detected insufficient power on the PCIe slot (27W).");
    REQUIRE(p);
    CHECK(p->rule == "mlx5-pcie-power");
    CHECK(p->severity == Severity::kWarning);
    auto c = ex().extract(
        "mlx5_core 0000:5e:00.1: mlx5_port_module_event:1175:(pid 0): Port module event[error]: module 0, Cable error, "
        "High Temperature");
    REQUIRE(c);
    CHECK(c->rule == "mlx5-cable");
    CHECK(c->detail.find("High Temperature") != std::string::npos);
    auto n = ex().extract(
        "mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838:(pid 5562): ACCESS_REG(0x805) op_mod(0x1) failed, status bad "
        "resource(0x5), syndrome (0x305684), err(-22)");
    REQUIRE(n);
    CHECK(n->rule == "mlx5-access-reg");
    CHECK(n->severity == Severity::kInfo);
}

TEST_CASE("OOM killer and user-space crashes", "[events]") {
    auto o = ex().extract(
        "Out of memory: Killed process 41234 (python) total-vm:123456kB, anon-rss:1000kB, file-rss:0kB, shmem-rss:0kB, "
        "UID:1000 pgtables:100kB oom_score_adj:0");
    REQUIRE(o);
    CHECK(o->kind == "oom");
    CHECK(o->detail.rfind("python[41234]", 0) == 0);
    auto cg = ex().extract("Memory cgroup out of memory: Killed process 777 (torchrun) total-vm:1kB");
    REQUIRE(cg);
    CHECK(cg->kind == "oom");
    auto s = ex().extract(
        "python3[12345]: segfault at 0 ip 00007f0000000000 sp 00007ffd00000000 error 4 in "
        "libc.so.6[7f0000000000+195000]");
    REQUIRE(s);
    CHECK(s->kind == "segfault");
    CHECK(s->detail.rfind("python3[12345]", 0) == 0);
    auto gp = ex().extract("traps: nccl-tests[999] general protection fault ip:7f sp:7ffc error:0 in libnccl.so.2");
    REQUIRE(gp);
    CHECK(gp->kind == "segfault");
}

TEST_CASE("ordinary kernel lines are not events", "[events]") {
    CHECK_FALSE(ex().extract("NET: Registered PF_INET6 protocol family"));
    CHECK_FALSE(ex().extract("nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver"));
    CHECK_FALSE(ex().extract("mlx5_core 0000:3b:00.0: firmware version: 28.39.1002"));
    CHECK_FALSE(ex().extract(""));
    std::string hostile(size_t{100} * 1024, 'x');
    hostile += "NVRM: Xid (";
    CHECK_FALSE(ex().extract(hostile));
}

namespace {

// One genuine kernel line per device rule, as the drivers print them.
const std::vector<std::pair<std::string, std::string>>& kernel_lines() {
    static const std::vector<std::pair<std::string, std::string>> lines = {
        {"xid", "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus."},
        {"xid", "NVRM: Xid (0000:03:00): 14, Channel 00000001"},
        {"xid79-no-xid-word", "NVRM: GPU 0000:18:00.0: GPU has fallen off the bus."},
        {"sxid",
         "nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)"},
        {"mlx5-cmd-timeout",
         "mlx5_core 0000:3b:00.0: wait_func:1120:(pid 2041): ACCESS_REG(0x805) timeout. Will cause a leak of a "
         "command resource"},
        {"mlx5-health",
         "mlx5_core 0000:5e:00.0: poll_health:800:(pid 0): device's health compromised - reached miss count"},
        {"pcie-aer-fatal", "pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0"},
        {"pcie-aer-corrected", "pcieport 0000:00:03.1: AER: Corrected error received: 0000:05:00.0"},
        {"oom-kill", "Out of memory: Killed process 41234 (python) total-vm:123456kB, anon-rss:1000kB"},
        {"oom-kill", "Memory cgroup out of memory: Killed process 777 (torchrun) total-vm:1kB, anon-rss:1kB"},
    };
    return lines;
}

jobtrail::kmsg::Record record(std::string_view raw) {
    jobtrail::kmsg::Record r;
    jobtrail::kmsg::ParseError err;
    REQUIRE(jobtrail::kmsg::parse_record(raw, r, err));
    return r;
}

}  // namespace

TEST_CASE("genuine kernel lines of every device rule still match", "[events][hostile]") {
    for (const auto& [rule, line] : kernel_lines()) {
        INFO(line);
        auto e = ex().extract(line);
        REQUIRE(e);
        CHECK(e->rule == rule);
    }
    auto sx = ex().extract(kernel_lines()[3].second);
    REQUIRE(sx);
    CHECK(sx->kind == "sxid");
    CHECK(sx->xid == 12028);
    CHECK(sx->pci_bdf == "0000:05:00.0");
    auto aer = ex().extract(kernel_lines()[6].second);
    REQUIRE(aer);
    CHECK(aer->kind == "pcie");
    CHECK(aer->severity == Severity::kFatal);
    CHECK(aer->pci_bdf == "0000:00:01.0");
}

TEST_CASE("a binary named like an Xid that segfaults is a segfault, not an Xid", "[events][hostile]") {
    // The kernel prints the comm (the name cut to 15 bytes) first and the whole name last.
    const std::string name = "NVRM: Xid (PCI:0000:3b:00): 79, x";
    for (const std::string& comm : {name.substr(0, 15), name}) {
        INFO(comm);
        auto e = ex().extract(comm + "[1234]: segfault at 0 ip 0000000000401000 sp 00007ffc00000000 error 4 in " +
                              name + "[401000+1000]");
        REQUIRE(e);
        CHECK(e->kind == "segfault");
        CHECK(e->xid == 0);
        CHECK(e->severity == Severity::kError);
        CHECK(e->detail.rfind(comm + "[1234]: segfault at 0", 0) == 0);
    }
    // The same trick with every device rule's line, in a segfault and in a general protection fault.
    for (const auto& [rule, line] : kernel_lines()) {
        INFO(line);
        const std::string comm = line.substr(0, 15);
        auto s = ex().extract(comm + "[99]: segfault at 10 ip 00007f00 sp 00007ffc error 6 in " + line + "[7f00+10]");
        REQUIRE(s);
        CHECK(s->kind == "segfault");
        CHECK(s->xid == 0);
        auto g = ex().extract("traps: " + comm + "[99] general protection fault ip:7f sp:7ffc error:0 in " + line);
        REQUIRE(g);
        CHECK(g->kind == "segfault");
        CHECK(g->xid == 0);
    }
}

TEST_CASE("rules match only at the start of the kernel message", "[events][hostile]") {
    for (const auto& [rule, line] : kernel_lines()) {
        INFO(line);
        CHECK_FALSE(ex().extract("x " + line));
        CHECK_FALSE(ex().extract("python3 (4242): drop_caches: 3 " + line));
    }
    for (const Rule& r : rules()) {
        INFO(r.name);
        CHECK(r.pattern.substr(0, 1) == "^");
    }
}

TEST_CASE("only the kernel's own records are events", "[events][hostile]") {
    const std::string xid =
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    // prio 14 = user(1) << 3 | info: "echo '<14>NVRM: ...' > /dev/kmsg" as root in a job; the
    // kernel refuses facility 0 from userspace.
    CHECK_FALSE(ex().extract(record("14,500,1000,-;" + xid + "\n")));
    CHECK_FALSE(ex().extract(record("11,501,1000,-;" + xid + "\n")));                       // user, err
    CHECK_FALSE(ex().extract(record("187,502,1000,-;" + xid + "\n")));                      // local7, err
    CHECK_FALSE(ex().extract(record("30,503,1000,-;" + kernel_lines()[6].second + "\n")));  // daemon
    auto k = ex().extract(record("3,504,1000,-;" + xid + "\n"));                            // kernel, err
    REQUIRE(k);
    CHECK(k->xid == 79);
    CHECK(k->severity == Severity::kFatal);
}

TEST_CASE("catalogue lookups", "[events]") {
    REQUIRE(find_xid(79));
    CHECK(find_xid(79)->immediate == "RESTART_BM");
    CHECK(find_xid(48)->severity == Severity::kFatal);
    CHECK(find_xid(13)->immediate == "RESTART_APP");
    CHECK(find_xid(63)->immediate == "IGNORE");
    CHECK(find_xid(61)->immediate == "CONTACT_SUPPORT");
    CHECK(find_xid(9999) == nullptr);
    for (const auto& x : xid_catalogue()) {
        CHECK_FALSE(x.mnemonic.empty());
        CHECK_FALSE(x.action.empty());
    }
}
