#include "collector/job_devices.hpp"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "collector_job.hpp"
#include "common/text.hpp"
#include "temp_dir.hpp"

using namespace jobtrail;
using namespace jobtrail::collector;
using test::CollectorJob;

namespace {

// A GPU node as the prolog of a job with SLURM_JOB_GPUS=`job_gpus` sees it, all in the job's
// scratch directory: the driver's tree (collector.nvidia_proc), the device files, `slurmd -G`
// (a stand-in in the probes' PATH) and `cat` (the driver's files are read through it).
class GpuNode {
public:
    explicit GpuNode(const std::string& job_gpus) : job_("  nvidia_proc: @DIR@/nvidia\n") {
        ::setenv("SLURM_JOB_GPUS", job_gpus.c_str(), 1);
        std::filesystem::create_directories(dev());
        std::filesystem::create_directories(job_.dir() + "/nvidia/gpus");
        std::filesystem::create_symlink("/bin/cat", job_.dir() + "/bin/cat");
    }
    ~GpuNode() { ::unsetenv("SLURM_JOB_GPUS"); }
    GpuNode(const GpuNode&) = delete;
    GpuNode& operator=(const GpuNode&) = delete;

    std::string dev() const { return job_.dir() + "/dev"; }
    const CollectorJob& job() const { return job_; }

    // /dev/nvidia<minor> and the driver's entry for it (kernel-open/nvidia/nv-procfs.c's format).
    void gpu(int minor, const std::string& bdf) const {
        device_file("nvidia" + std::to_string(minor), S_IFCHR, 195, minor);
        driver_entry(bdf, "Model: \t\t NVIDIA H100 80GB HBM3\nIRQ:   \t\t 0\nGPU UUID: \t " + uuid(minor) +
                              "\nBus Type: \t PCIe\nBus Location: \t " + bdf + "\nDevice Minor: \t " +
                              std::to_string(minor) + "\nGPU Excluded:\t No\n");
    }
    static std::string uuid(int minor) { return "GPU-6f6ea5a4-1b0e-4b1a-8cc4-0000000000" + std::to_string(10 + minor); }
    void driver_entry(const std::string& name, const std::string& information) const {
        std::filesystem::create_directories(job_.dir() + "/nvidia/gpus/" + name);
        std::ofstream(job_.dir() + "/nvidia/gpus/" + name + "/information") << information;
    }
    void device_file(const std::string& name, mode_t type, unsigned major, int minor) const {
        REQUIRE(::mknod((dev() + "/" + name).c_str(), type | 0600, makedev(major, static_cast<unsigned>(minor))) == 0);
    }
    // What `slurmd -G` prints (on standard error, as slurmd logs).
    void slurmd_g(const std::string& lines, int status = 0) const {
        job_.script("bin/slurmd",
                    "[ \"$1\" = -G ] || exit 2\ncat >&2 <<'EOF'\n" + lines + "\nEOF\nexit " + std::to_string(status));
    }

    struct Prolog {
        devices::Resolution r;
        std::vector<std::string> devices;  // the job log's `device` lines
        std::string unresolved;            // its `device[unresolved]` line, or "(none)"
    };
    // The prolog's part: the devices resolved and written to the job log.
    Prolog prolog(const std::map<std::string, std::vector<std::string>>& probes = {}) const {
        Prolog p;
        {
            Session s(Phase::kProlog, job_.config());
            p.r = resolve_job_devices(s, probes);
            log_job_devices(s, p.r);
        }
        for (const auto& l : job_.log("prolog"))
            if (l.tag == joblog::kDevice && l.name.empty()) p.devices.push_back(l.text);
        p.unresolved = job_.text("prolog", joblog::kDevice, "unresolved");
        return p;
    }

private:
    CollectorJob job_;
};

// A Debian slurmd 22.05's `slurmd -G` line for one gres.conf record.
std::string gres(const std::string& type, int count, const std::string& file, const std::string& flags = "") {
    return "slurmd-gpu01: Gres Name=gpu Type=" + type + " Count=" + std::to_string(count) +
           " Index=0 ID=7696487 File=" + file + (flags.empty() ? " (null)" : " Links=(null) Flags=" + flags);
}

// What the nvidia-smi probe of etc/jobtrail.yaml prints (its first columns).
const std::vector<std::string> kSmi = {
    "index, pci.bus_id, serial, uuid, temperature.gpu",
    "0, 00000000:18:00.0, 1652922012345, GPU-6f6ea5a4-1b0e-4b1a-8cc4-000000000014, 34",
    "1, 00000000:3B:00.0, 1652922012346, GPU-6f6ea5a4-1b0e-4b1a-8cc4-000000000015, 35",
    "2, 00000000:86:00.0, 1652922012347, GPU-6f6ea5a4-1b0e-4b1a-8cc4-000000000016, 33"};

}  // namespace

TEST_CASE("the prolog names the job's GPUs by Slurm's positions in slurmd -G's list, with PCI address, uuid and serial",
          "[collector]") {
    // gres.conf with one line per device, not in the files' order: Slurm's GPU 0 is nvidia6 and
    // GPU 1 is nvidia4, whatever -G's "Index=" says. A shard record and slurmd's own log lines
    // take no position.
    GpuNode node("0,1");
    node.gpu(4, "0000:18:00.0");
    node.gpu(5, "0000:3B:00.0");
    node.gpu(6, "0000:86:00.0");
    const std::string d = node.dev();
    node.slurmd_g("slurmd-gpu01: error: Couldn't find the specified plugin name for gpu/nvml looking at all files\n" +
                  gres("h100", 1, d + "/nvidia6") + "\n" + gres("h100", 1, d + "/nvidia4") +
                  "\nslurmd-gpu01: Gres Name=shard Type=(null) Count=8 Index=0 ID=1684104563 File=" + d +
                  "/nvidia5 (null)\n" + gres("h100", 1, d + "/nvidia5"));
    const auto p = node.prolog({{"nvidia-smi", kSmi}});
    CHECK(p.r.note.empty());
    CHECK(p.unresolved == "(none)");
    CHECK(p.devices == std::vector<std::string>{
                           "kind=gpu index=6 bdf=0000:86:00.0 uuid=" + GpuNode::uuid(6) + " serial=1652922012347",
                           "kind=gpu index=4 bdf=0000:18:00.0 uuid=" + GpuNode::uuid(4) + " serial=1652922012345"});
}

TEST_CASE("a MIG slice after the job's whole GPU neither hides that GPU nor marks the job's devices unresolved",
          "[collector]") {
    GpuNode node("0");
    node.gpu(4, "0000:18:00.0");
    node.gpu(5, "0000:3b:00.0");
    const std::string d = node.dev();
    node.slurmd_g(
        gres("h100", 1, d + "/nvidia4") + "\n" +
        gres("1g.10gb", 1, d + "/nvidia5," + d + "/nvidia-caps/nvidia-cap21", "HAS_FILE,HAS_TYPE,ENV_NVML,MIG"));
    const auto p = node.prolog({{"nvidia-smi", kSmi}});
    CHECK(p.devices == std::vector<std::string>{"kind=gpu index=4 bdf=0000:18:00.0 uuid=" + GpuNode::uuid(4) +
                                                " serial=1652922012345"});
    CHECK(p.r.note.empty());
    CHECK(p.unresolved == "(none)");
}

TEST_CASE("the prolog maps only NVIDIA character devices: a file or another device named like a GPU is no GPU",
          "[collector]") {
    // Slurm's GPUs 0-3 are nvidia[4-7]: 4 a plain file, 5 the GPU, 6 a character device of
    // another driver (/dev/null's numbers), 7 a block device with the GPU's numbers.
    GpuNode node("0,1,2,3");
    node.gpu(5, "0000:3b:00.0");
    node.driver_entry("0000:18:00.0", "Bus Location: \t 0000:18:00.0\nDevice Minor: \t 4\n");
    node.driver_entry("0000:86:00.0", "Bus Location: \t 0000:86:00.0\nDevice Minor: \t 6\n");
    node.driver_entry("0000:af:00.0", "Bus Location: \t 0000:af:00.0\nDevice Minor: \t 7\n");
    std::ofstream(node.dev() + "/nvidia4") << "";
    node.device_file("nvidia6", S_IFCHR, 1, 3);
    node.device_file("nvidia7", S_IFBLK, 195, 7);
    node.slurmd_g(gres("(null)", 4, node.dev() + "/nvidia[4-7]"));
    const auto p = node.prolog();
    CHECK(p.devices == std::vector<std::string>{"kind=gpu index=5 bdf=0000:3b:00.0 uuid=" + GpuNode::uuid(5)});
    CHECK(p.unresolved == "note=\"no device file known for Slurm GPU index 0,2,3\" attribution=node-wide");
}

TEST_CASE("without nvidia-smi's serials the job's GPUs are still named, and no other GPU's serial is taken",
          "[collector]") {
    GpuNode node("1");
    node.gpu(4, "0000:18:00.0");
    node.gpu(5, "0000:3b:00.0");
    node.slurmd_g(gres("h100", 2, node.dev() + "/nvidia[4-5]"));
    const std::string ours = "kind=gpu index=5 bdf=0000:3b:00.0 uuid=" + GpuNode::uuid(5);
    SECTION("no nvidia-smi probe ran") {
        CHECK(node.prolog().devices == std::vector<std::string>{ours});
    }
    SECTION("nvidia-smi failed") {
        const auto p = node.prolog(
            {{"nvidia-smi", {"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."}}});
        CHECK(p.devices == std::vector<std::string>{ours});
    }
    SECTION("nvidia-smi listed only the other GPU, and ours without a serial") {
        const auto p = node.prolog(
            {{"nvidia-smi",
              {kSmi[0], kSmi[1], "1, 00000000:3B:00.0, [N/A], GPU-6f6ea5a4-1b0e-4b1a-8cc4-000000000015, 35"}}});
        CHECK(p.devices == std::vector<std::string>{ours});
    }
    CHECK(node.job().text("prolog", joblog::kDevice, "unresolved") == "(none)");
}

TEST_CASE("what keeps the prolog from knowing the job's GPUs is said in the job log, and no GPU is guessed",
          "[collector]") {
    GpuNode node("0");
    node.gpu(4, "0000:18:00.0");
    node.gpu(5, "0000:3b:00.0");
    const std::string d = node.dev();
    std::string note;
    SECTION("no slurmd to ask") {
        note = "cannot map SLURM_JOB_GPUS to devices (collector.gres_command: slurmd not found)";
    }
    SECTION("slurmd -G fails") {
        node.slurmd_g("slurmd-gpu01: fatal: Unable to determine this slurmd's NodeName", 1);
        note = "cannot map SLURM_JOB_GPUS to devices (collector.gres_command: " + node.job().dir() +
               "/bin/slurmd: exit 1)";
    }
    SECTION("slurmd -G lists no GPU") {
        node.slurmd_g("slurmd-gpu01: Gres Name=shard Type=(null) Count=8 Index=0 ID=1684104563 File=" + d +
                      "/nvidia4 (null)");
        note = "collector.gres_command listed no GPU device file";
    }
    SECTION("slurmd -G names no file (Slurm 23.02 without DebugFlags=GRES)") {
        node.slurmd_g("[2026-12-03T08:34:03.597] Gres Name=gpu Type=h100 Count=2 Flags=HAS_TYPE,ENV_NVML");
        note =
            "collector.gres_command listed no GPU device file (unresolved, its kernel events node-wide: slurmd -G "
            "named no device file for a GPU record (Slurm 23.02 and later print files only with DebugFlags=GRES))";
    }
    SECTION("the job's GPU is a MIG slice, listed before the whole GPUs") {
        // Slurm's GPU 0 is the slice, 1 and 2 nvidia[4-5]: neither may be taken for GPU 0.
        node.slurmd_g(
            gres("1g.10gb", 1, d + "/nvidia4," + d + "/nvidia-caps/nvidia-cap21", "HAS_FILE,HAS_TYPE,ENV_NVML,MIG") +
            "\n" + gres("h100", 2, d + "/nvidia[4-5]"));
        note =
            "collector.gres_command listed no GPU device file (unresolved, its kernel events node-wide: a MIG slice "
            "(its GPU cannot be mapped to a device file here))";
    }
    SECTION("the job's GPU is a MIG slice after a whole GPU") {
        ::setenv("SLURM_JOB_GPUS", "1", 1);
        node.slurmd_g(
            gres("h100", 1, d + "/nvidia4") + "\n" +
            gres("1g.10gb", 1, d + "/nvidia5," + d + "/nvidia-caps/nvidia-cap21", "HAS_FILE,HAS_TYPE,ENV_NVML,MIG"));
        note =
            "no device file known for Slurm GPU index 1 (unresolved, its kernel events node-wide: a MIG slice (its "
            "GPU cannot be mapped to a device file here))";
    }
    SECTION("the job's GPU is past the node's") {
        ::setenv("SLURM_JOB_GPUS", "2", 1);
        node.slurmd_g(gres("h100", 2, d + "/nvidia[4-5]"));
        note = "no device file known for Slurm GPU index 2";
    }
    SECTION("the driver does not list the job's GPU") {
        std::filesystem::remove_all(node.job().dir() + "/nvidia/gpus/0000:18:00.0");
        node.slurmd_g(gres("h100", 2, d + "/nvidia[4-5]"));
        note = "the driver lists no GPU with minor 4";
    }
    SECTION("the driver's entry for the job's GPU cannot be read") {
        node.driver_entry("0000:18:00.0", "Model: \t\t NVIDIA H100 80GB HBM3\nDevice Minor: \t 4\n");
        node.slurmd_g(gres("h100", 2, d + "/nvidia[4-5]"));
        note = "the driver lists no GPU with minor 4; driver entry 0000:18:00.0 unreadable";
    }
    SECTION("no driver") {
        std::filesystem::remove_all(node.job().dir() + "/nvidia");
        node.slurmd_g(gres("h100", 2, d + "/nvidia[4-5]"));
        note = "the driver lists no GPU with minor 4; no GPU list at " + node.job().dir() + "/nvidia/gpus";
    }
    const auto p = node.prolog({{"nvidia-smi", kSmi}});
    CHECK(p.r.note == note);
    CHECK(p.devices.empty());
    CHECK(p.unresolved == "note=" + logfmt_value(note) + " attribution=node-wide");
}

TEST_CASE("a SLURM_JOB_GPUS that is no index list resolves no GPU and is quoted, cut short, in the job log",
          "[collector]") {
    const std::string value =
        GENERATE(std::string("0;1"), std::string("0,1x"), std::string("1-0"), std::string("-1"), std::string("0-300"),
                 std::string("99999999"), std::string("0 1\nkind=gpu index=5"), std::string(200, '7'));
    GpuNode node(value);
    node.gpu(4, "0000:18:00.0");
    node.gpu(5, "0000:3b:00.0");
    node.slurmd_g(gres("h100", 2, node.dev() + "/nvidia[4-5]"));
    const auto p = node.prolog();
    const std::string note = "SLURM_JOB_GPUS=" + logfmt_value(value.substr(0, 64)) + " is not an index list";
    CHECK(p.r.note == note);
    CHECK(p.r.devices.empty());
    CHECK(p.devices.empty());
    CHECK(p.unresolved == "note=" + logfmt_value(note) + " attribution=node-wide");
}

TEST_CASE("a job without GPUs does not ask slurmd", "[collector]") {
    GpuNode node("");
    node.gpu(4, "0000:18:00.0");
    node.job().script("bin/slurmd", "touch " + node.job().dir() + "/asked");
    const auto p = node.prolog({{"nvidia-smi", kSmi}});
    CHECK(p.devices.empty());
    CHECK(p.unresolved == "(none)");
    CHECK_FALSE(std::filesystem::exists(node.job().dir() + "/asked"));
}

TEST_CASE("a driver file that never answers (a wedged GPU) holds the prolog only for its device budget",
          "[collector]") {
    // The other GPU's entry, read first, blocks (a FIFO nobody writes): `cat` is killed at the
    // budget's end (5 s), and the job's GPU, not read then, is said unresolved rather than guessed.
    GpuNode node("1");
    node.gpu(5, "0000:3b:00.0");
    std::filesystem::create_directories(node.job().dir() + "/nvidia/gpus/0000:18:00.0");
    REQUIRE(::mkfifo((node.job().dir() + "/nvidia/gpus/0000:18:00.0/information").c_str(), 0600) == 0);
    node.device_file("nvidia4", S_IFCHR, 195, 4);
    node.slurmd_g(gres("h100", 2, node.dev() + "/nvidia[4-5]"));
    const auto p = node.prolog({{"nvidia-smi", kSmi}});
    CHECK(p.devices.empty());
    CHECK(p.r.note == "the driver lists no GPU with minor 5; driver entry 0000:18:00.0: " + node.job().dir() +
                          "/bin/cat timed out");
}

TEST_CASE("slurmd is looked for beside the slurmd or slurmstepd we run under and beside no other program",
          "[collector]") {
    // A Slurm under a prefix: its sbin/ holds slurmd and slurmstepd, in no PATH. Each stand-in is a
    // copy of sleep under that name, so that /proc/<pid>/exe names it.
    jobtrail::test::TempDir d;
    const auto beside = [&](const std::string& name, bool slurmd_there) {
        const std::string sbin = d.path() + "/" + name + (slurmd_there ? "" : "-alone") + "/sbin";
        std::filesystem::create_directories(sbin);
        std::filesystem::copy_file("/bin/sleep", sbin + "/" + name);
        std::filesystem::permissions(sbin + "/" + name, std::filesystem::perms(0755));
        if (slurmd_there && name != "slurmd") {
            std::ofstream(sbin + "/slurmd") << "#!/bin/sh\n";
            std::filesystem::permissions(sbin + "/slurmd", std::filesystem::perms(0755));
        }
        const std::string exe = sbin + "/" + name;
        const pid_t pid = ::fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            ::execl(exe.c_str(), name.c_str(), "30", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        // Until the child is the stand-in (after its exec).
        std::error_code ec;
        for (int i = 0; i < 500 && std::filesystem::read_symlink("/proc/" + std::to_string(pid) + "/exe", ec) != exe;
             ++i)
            ::usleep(10'000);
        const std::string found = slurmd_beside(pid);
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        return found == "" ? std::string("none") : found.substr(d.path().size());
    };
    CHECK(beside("slurmstepd", true) == "/slurmstepd/sbin/slurmd");
    CHECK(beside("slurmd", true) == "/slurmd/sbin/slurmd");
    CHECK(beside("slurmstepd", false) == "none");  // no slurmd beside it: not guessed
    CHECK(beside("bash", true) == "none");         // a slurmd beside another program is not Slurm's
    CHECK(beside("slurmstepd2", true) == "none");
}
