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

namespace {

// Lines as the drivers print them (../shared/reference E2/E3, the kernel's format strings), with
// what an operator must get from each.
struct Expected {
    std::string line;
    std::string rule, kind, bdf;
    Severity severity;
    std::string detail;  // the start of the event's detail
    int xid = 0;
};

const std::vector<Expected>& device_lines() {
    static const std::vector<Expected> v = {
        {"nvidia-nvswitch3: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error (First)",
         "sxid", "sxid", "0000:05:00.0", Severity::kError, "Non-fatal, Link 32 egress", 12028},
        {"nvidia-nvswitch0: SXid (PCI:0000:c5:00.0): 20034, Fatal, Link 30 LTSSM Fault Up", "sxid", "sxid",
         "0000:c5:00.0", Severity::kError, "Fatal, Link 30 LTSSM Fault Up", 20034},
        {"pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0", "pcie-aer-fatal", "pcie",
         "0000:00:01.0", Severity::kFatal, "Uncorrected (Fatal) error received: 0000:01:00.0"},
        {"pcieport 0000:c0:01.1: AER: Uncorrectable (Non-Fatal) error message received from 0000:c1:00.0",
         "pcie-aer-fatal", "pcie", "0000:c0:01.1", Severity::kFatal, "Uncorrectable (Non-Fatal) error message"},
        {"pcieport 0000:c0:01.1: AER: Multiple Uncorrectable (Fatal) error message received from 0000:c1:00.0",
         "pcie-aer-fatal", "pcie", "0000:c0:01.1", Severity::kFatal, "Multiple Uncorrectable (Fatal) error message"},
        {"nvidia 0000:3b:00.0: AER: Uncorrected (Non-Fatal) error received: 0000:3b:00.0", "pcie-aer-fatal", "pcie",
         "0000:3b:00.0", Severity::kFatal, "Uncorrected (Non-Fatal)"},
        {"pcieport 0000:00:03.1: AER: Corrected error received: 0000:05:00.0", "pcie-aer-corrected", "pcie",
         "0000:00:03.1", Severity::kInfo, "Corrected error received: 0000:05:00.0"},
        {"pcieport 0000:00:03.1: AER: Correctable error message received from 0000:05:00.0", "pcie-aer-corrected",
         "pcie", "0000:00:03.1", Severity::kInfo, "Correctable error message received from 0000:05:00.0"},
        {"mlx5_core 0000:5e:00.0: AER: Multiple Correctable error message received from 0000:5e:00.0",
         "pcie-aer-corrected", "pcie", "0000:5e:00.0", Severity::kInfo, "Multiple Correctable error message"},
        {"INFO: task python3:41234 blocked for more than 120 seconds.", "hung-task", "hung_task", "",
         Severity::kWarning, "python3[41234]: blocked for more than 120 seconds"},
        {"INFO: task kworker/u256:3:987 blocked for more than 241 seconds.", "hung-task", "hung_task", "",
         Severity::kWarning, "kworker/u256:3[987]: blocked for more than 241 seconds"},
        {"NETDEV WATCHDOG: enp59s0f0np0 (mlx5_core): transmit queue 3 timed out", "mlx5-tx-timeout", "mlx5", "",
         Severity::kWarning, "NETDEV WATCHDOG: enp59s0f0np0 (mlx5_core): transmit queue 3 timed out"},
        {"mlx5_core 0000:3b:00.0 enp59s0f0np0: NETDEV WATCHDOG: enp59s0f0np0 (mlx5_core): transmit queue 7 timed "
         "out 5120 ms",
         "mlx5-tx-timeout", "mlx5", "0000:3b:00.0", Severity::kWarning,
         "NETDEV WATCHDOG: enp59s0f0np0 (mlx5_core): transmit queue 7 timed out 5120 ms"},
        {"mlx5_core 0000:5e:00.1: mlx5_port_module_event:1175:(pid 0): Port module event: module 0, Cable plugged",
         "mlx5-module", "mlx5", "0000:5e:00.1", Severity::kInfo, "module 0, Cable plugged"},
        {"mlx5_core 0000:5e:00.0: Port module event: module 1, Cable unplugged", "mlx5-module", "mlx5", "0000:5e:00.0",
         Severity::kInfo, "module 1, Cable unplugged"},
        {"mlx5_core 0000:5e:00.1: mlx5_port_module_event:1175:(pid 0): Port module event[error]: module 0, Cable "
         "error, High Temperature",
         "mlx5-cable", "mlx5", "0000:5e:00.1", Severity::kError, "module 0, Cable error, High Temperature"},
        {"mlx5_core 0000:b1:00.0: cmd_work_handler:1035:(pid 123): cmd[0]: CREATE_MKEY(0x200) Async, timeout. Will "
         "cause a leak of a command resource",
         "mlx5-cmd-timeout", "mlx5", "0000:b1:00.0", Severity::kFatal, "cmd[0]: CREATE_MKEY(0x200) Async, timeout"},
        {"mlx5_core 0000:5e:00.0: poll_health:800:(pid 0): Fatal error 1 detected", "mlx5-health", "mlx5",
         "0000:5e:00.0", Severity::kFatal, "Fatal error 1 detected"},
        {"mlx5_core 0000:5e:00.0: print_health_info:424:(pid 0): synd 0x8: unrecoverable hardware error", "mlx5-health",
         "mlx5", "0000:5e:00.0", Severity::kFatal, "unrecoverable hardware error"},
        {"mlx5_core 0000:5e:00.0: mlx5_pcie_event:299:(pid 10): Detected insufficient power on the PCIe slot (27W).",
         "mlx5-pcie-power", "mlx5", "0000:5e:00.0", Severity::kWarning, "insufficient power on the PCIe slot (27W)"},
    };
    return v;
}

}  // namespace

TEST_CASE("every device rule: realistic lines give the rule, the device, the severity and the detail", "[events]") {
    for (const auto& x : device_lines()) {
        INFO(x.line);
        auto e = ex().extract(x.line);
        REQUIRE(e);
        CHECK(e->rule == x.rule);
        CHECK(e->kind == x.kind);
        CHECK(e->pci_bdf == x.bdf);
        CHECK(severity_name(e->severity) == severity_name(x.severity));
        CHECK(e->detail.rfind(x.detail, 0) == 0);
        CHECK(e->xid == x.xid);
        CHECK_FALSE(e->meaning.empty());
        CHECK_FALSE(e->action.empty());
    }
}

TEST_CASE("forged device lines: written from user space, behind user text, or in a user's name", "[events][hostile]") {
    for (const auto& x : device_lines()) {
        INFO(x.line);
        // Root in a job writing the line to /dev/kmsg: a user facility, never an event.
        CHECK_FALSE(ex().extract(record("14,900,1000,-;" + x.line + "\n")));
        CHECK_FALSE(ex().extract(record("187,901,1000,-;" + x.line + "\n")));
        // The same line from the kernel is one.
        auto k = ex().extract(record("3,902,1000,-;" + x.line + "\n"));
        REQUIRE(k);
        CHECK(k->rule == x.rule);
        // Behind text a user chose (a comm, a drop_caches note): not at the start, not an event.
        CHECK_FALSE(ex().extract("bash (4242): drop_caches: 3 " + x.line));
        CHECK_FALSE(ex().extract(" " + x.line));
    }
    // A hung task whose name is a device line is a hung task, with that name as its comm.
    auto h = ex().extract("INFO: task NVRM: Xid (PCI:0000:3b:00): 79, x:4242 blocked for more than 120 seconds.");
    REQUIRE(h);
    CHECK(h->kind == "hung_task");
    CHECK(h->xid == 0);
    CHECK(h->pci_bdf.empty());
    // An AER line with a malformed device address is not read as one of another device.
    CHECK_FALSE(ex().extract("pcieport 0000:00:01: AER: Uncorrected (Fatal) error received: 0000:01:00.0"));
    CHECK_FALSE(ex().extract("pcieport x0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:01:00.0"));
    CHECK_FALSE(ex().extract("mlx5_core 0000:5e:00: Port module event: module 1, Cable unplugged"));
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

namespace {

// NVIDIA's Xid catalogue as ../shared/reference/protocols-and-peers.md (E1) gives it: code,
// immediate and investigatory resolution bucket ("?" where the reference names none), and the
// severity that its "our triage" column means: drain the node -> fatal, the job or the
// application -> error, watch or follow another Xid -> warning, nothing to do now -> info.
struct CatalogueRow {
    int code;
    std::string_view immediate;
    std::string_view investigatory;
    Severity severity;
};
using S = Severity;
constexpr CatalogueRow kReference[] = {
    {8, "RESTART_APP", "CONTACT_SUPPORT", S::kError},
    {13, "RESTART_APP", "WORKFLOW_XID_13", S::kError},
    {31, "RESTART_APP", "WORKFLOW_XID_31", S::kError},
    {32, "RESTART_APP", "CHECK_APP_CUDA", S::kError},  // the reference's CHECK_APP/CUDA
    {43, "IGNORE", "CONTACT_SUPPORT", S::kWarning},
    {45, "WORKFLOW_XID_45", "RESTART_FM_IF_ALONE", S::kWarning},  // "solo: RESTART_FM; else follow other Xid"
    {46, "RESET_GPU", "CONTACT_SUPPORT", S::kFatal},
    {48, "WORKFLOW_XID_48", "WORKFLOW_XID_48", S::kFatal},
    {61, "CONTACT_SUPPORT", "", S::kFatal},
    {62, "RESET_GPU", "CONTACT_SUPPORT", S::kFatal},
    {63, "IGNORE", "IGNORE", S::kInfo},
    {64, "RESET_GPU", "CONTACT_SUPPORT", S::kFatal},
    {68, "RESTART_APP", "CONTACT_SUPPORT", S::kError},
    {69, "RESTART_APP", "CHECK_APP_CUDA", S::kError},
    {74, "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT", S::kFatal},
    {79, "RESTART_BM", "CONTACT_SUPPORT", S::kFatal},
    {92, "IGNORE", "CONTACT_SUPPORT", S::kWarning},
    {94, "RESTART_APP", "IGNORE", S::kError},
    {95, "RESET_GPU", "IGNORE", S::kFatal},
    {109, "RESET_GPU", "CONTACT_SUPPORT", S::kFatal},
    {119, "RESET_GPU", "INVESTIGATE_SW", S::kFatal},
    {120, "RESET_GPU", "INVESTIGATE_SW", S::kFatal},
    {136, "RESET_GPU", "INVESTIGATE_LINK_SI", S::kFatal},
    {140, "RESET_GPU", "CONTACT_SUPPORT", S::kFatal},
    {143, "RESET_GPU", "CONTACT_SUPPORT", S::kFatal},
    {144, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {145, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {146, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {147, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {148, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {149, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {150, "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR", S::kFatal},
    {154, "XID_154", "", S::kWarning},
    {155, "RESET_GPU", "?", S::kFatal},
    {156, "RESET_GPU", "?", S::kFatal},
    {157, "?", "?", S::kFatal},  // RESOURCE_RETIREMENT_FAILURE: the reference names no bucket
    {158, "RESET_GPU", "?", S::kFatal},
    {171, "?", "?", S::kFatal},  // detail for Xid 48
    {172, "?", "?", S::kFatal},
};

// What the operator is told to do, by bucket: the words must agree with NVIDIA's bucket.
void check_action_fits(std::string_view immediate, std::string_view action) {
    INFO("action: " << action);
    const bool drain = action.find("drain the node") != std::string_view::npos;
    if (immediate == "RESTART_APP") {
        CHECK(action.rfind("restart the application", 0) == 0);
        CHECK_FALSE(drain);
    } else if (immediate == "RESET_GPU") {
        CHECK(drain);
        CHECK(action.find("reset") != std::string_view::npos);
    } else if (immediate == "RESTART_BM") {
        CHECK(drain);
        CHECK(action.find("reboot") != std::string_view::npos);
    } else if (immediate == "IGNORE") {
        CHECK_FALSE(drain);
        CHECK(action.find("restart the application") == std::string_view::npos);
    }
}

}  // namespace

TEST_CASE("the Xid catalogue is NVIDIA's, code by code: buckets, severity, action", "[events]") {
    std::vector<int> ours, reference;
    for (const auto& x : xid_catalogue()) ours.push_back(x.code);
    for (const auto& row : kReference) reference.push_back(row.code);
    CHECK(ours == reference);  // no code missing, none added without its row here
    for (const auto& row : kReference) {
        INFO("Xid " << row.code);
        const XidInfo* x = find_xid(row.code);
        REQUIRE(x);
        CHECK(x->code == row.code);
        if (row.immediate != "?") CHECK(x->immediate == row.immediate);
        if (row.investigatory != "?") CHECK(x->investigatory == row.investigatory);
        CHECK(severity_name(x->severity) == severity_name(row.severity));
        CHECK_FALSE(x->mnemonic.empty());
        CHECK_FALSE(x->meaning.empty());
        check_action_fits(x->immediate, x->action);
    }
}

TEST_CASE("every catalogued Xid line gets its bucket and severity from the catalogue", "[events]") {
    for (const auto& row : kReference) {
        if (row.code == 154) continue;  // its severity is the action it names (tested above)
        const std::string line =
            "NVRM: Xid (PCI:0000:3b:00): " + std::to_string(row.code) + ", pid=4242, name=python, x";
        INFO(line);
        auto e = ex().extract(line);
        REQUIRE(e);
        CHECK(e->xid == row.code);
        CHECK(severity_name(e->severity) == severity_name(row.severity));
        const XidInfo* x = find_xid(row.code);
        REQUIRE(x);
        CHECK(e->action.find("[NVIDIA: " + std::string(x->immediate) + "]") != std::string::npos);
        CHECK(e->meaning.rfind(std::string(x->mnemonic) + ": ", 0) == 0);
    }
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
