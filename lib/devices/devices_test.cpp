#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdio>
#include <fstream>
#include <string>

#include "devices/attribution.hpp"
#include "devices/gpus.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::devices;
using jobtrail::node::JobDevice;

namespace {

OomKill oom(std::string_view message) {
    return parse_oom_kill(message, default_slurm_cgroup_roots());
}

// As the driver writes it (kernel-open/nvidia/nv-procfs.c, 535+: "Key: \t value").
std::string information(int minor, const std::string& bdf) {
    return "Model: \t\t NVIDIA H100 80GB HBM3\n"
           "IRQ:   \t\t 0\n"
           "GPU UUID: \t GPU-6f6ea5a4-1b0e-4b1a-8cc4-0000000000" +
           std::to_string(10 + minor) +
           "\n"
           "Video BIOS: \t 96.00.74.00.0d\n"
           "Bus Type: \t PCIe\n"
           "DMA Size: \t 52 bits\n"
           "DMA Mask: \t 0xfffffffffffff\n"
           "Bus Location: \t " +
           bdf + "\nDevice Minor: \t " + std::to_string(minor) +
           "\nGPU Firmware: \t 550.54.15\n"
           "GPU Excluded:\t No\n";
}

void add_gpu(const std::string& root, const std::string& dir_name, const std::string& text) {
    ::mkdir((root + "/gpus").c_str(), 0755);
    ::mkdir((root + "/gpus/" + dir_name).c_str(), 0755);
    std::ofstream(root + "/gpus/" + dir_name + "/information") << text;
}

JobDevice gpu(int i, const std::string& bdf) {
    return JobDevice{"gpu", i, bdf, "", ""};
}

}  // namespace

TEST_CASE("devices: the driver's information file gives minor, bus location and uuid", "[devices]") {
    const auto g = parse_nvidia_information(information(3, "0000:3B:00.0"));
    REQUIRE(g);
    CHECK(g->minor == 3);
    CHECK(g->bdf == "0000:3b:00.0");
    CHECK(g->uuid == "GPU-6f6ea5a4-1b0e-4b1a-8cc4-000000000013");
    CHECK(g->model == "NVIDIA H100 80GB HBM3");
    // An older driver's file (no firmware line, "Blacklisted:") still reads.
    CHECK(parse_nvidia_information("Model: \t\t Tesla V100\nBus Location: \t 0000:86:00.0\nDevice Minor: \t 7\n"
                                   "Blacklisted:\t No\n")
              ->minor == 7);
    // Without the minor or the address the GPU cannot be matched: not a GPU entry.
    CHECK_FALSE(parse_nvidia_information("Model: \t\t X\nBus Location: \t 0000:86:00.0\n"));
    CHECK_FALSE(parse_nvidia_information("Device Minor: \t 1\n"));
    CHECK_FALSE(parse_nvidia_information("Bus Location: \t nonsense\nDevice Minor: \t 1\n"));
    CHECK_FALSE(parse_nvidia_information("Bus Location: \t 0000:86:00.0\nDevice Minor: \t -1\n"));
    CHECK_FALSE(parse_nvidia_information(""));
}

TEST_CASE("devices: PCI addresses of Xid, mlx5 and nvidia-smi forms are one key", "[devices]") {
    CHECK(bdf_key("0000:3b:00") == "0000:3b:00");
    CHECK(bdf_key("0000:3B:00.0") == "0000:3b:00");
    CHECK(bdf_key("00000000:3B:00.0") == "0000:3b:00");
    CHECK(bdf_key("3b:00.0") == "0000:3b:00");
    CHECK(bdf_key("0001:3b:00.1") == "0001:3b:00");
    CHECK(bdf_key("").empty());
    CHECK(bdf_key("0000:3b:00.9").empty());
    CHECK(bdf_key("zz00:3b:00.0").empty());
    CHECK(bdf_key("0000:3b").empty());
}

TEST_CASE("devices: Slurm index lists", "[devices]") {
    CHECK(*parse_index_list("0,1,3") == std::vector<int>{0, 1, 3});
    CHECK(*parse_index_list("0-2,5") == std::vector<int>{0, 1, 2, 5});
    CHECK(parse_index_list("")->empty());
    CHECK_FALSE(parse_index_list("0,a"));
    CHECK_FALSE(parse_index_list("3-1"));
    CHECK_FALSE(parse_index_list("0-99999999"));
    CHECK_FALSE(parse_index_list("-1"));
}

TEST_CASE("devices: a job's GPUs resolve to bus ids and serials, and what is missing is said", "[devices]") {
    const jobtrail::test::TempDir tree("nvidia");
    const std::string& root = tree.path();
    add_gpu(root, "0000:1b:00.0", information(0, "0000:1b:00.0"));
    add_gpu(root, "0000:3b:00.0", information(1, "0000:3b:00.0"));
    add_gpu(root, "0000:5d:00.0", "garbage\n");
    std::string note;
    const auto gpus = read_nvidia_gpus(root, note);
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].minor == 0);
    CHECK(note.find("0000:5d:00.0") != std::string::npos);

    const auto serials =
        serials_from_smi_csv({"index, pci.bus_id, serial, temperature.gpu", "0, 00000000:1B:00.0, 1650923004567, 31",
                              "1, 00000000:3B:00.0, [N/A], 33", "broken"});
    CHECK(serials.size() == 1);

    // Slurm's index is a position in the node's GRES list: here /dev/nvidia[1,0] (minors 1, 0).
    const std::map<int, int> minors = {{0, 1}, {1, 0}};
    auto r = resolve_job_gpus("0,1", minors, gpus, serials);
    REQUIRE(r.devices.size() == 2);
    CHECK(r.devices[0].bdf == "0000:3b:00.0");
    CHECK(r.devices[0].index == 1);
    CHECK(r.devices[1].bdf == "0000:1b:00.0");
    CHECK(r.devices[1].serial == "1650923004567");
    CHECK(r.devices[0].serial.empty());
    CHECK(r.note.empty());
    CHECK(describe(r.devices[1]) == "GPU 0 (0000:1b:00.0, serial 1650923004567)");

    r = resolve_job_gpus("1,4", {{0, 0}, {1, 1}, {4, 7}}, gpus, serials);
    CHECK(r.devices.size() == 1);
    CHECK(r.note == "the driver lists no GPU with minor 7");
    r = resolve_job_gpus("0,2", minors, gpus, serials);
    CHECK(r.devices.size() == 1);
    CHECK(r.note == "no device file known for Slurm GPU index 2");
    // Without the GRES map nothing is guessed.
    CHECK(resolve_job_gpus("0", {}, gpus, serials).devices.empty());
    CHECK(resolve_job_gpus("", minors, gpus, serials).note.empty());
    CHECK(resolve_job_gpus("x", minors, gpus, serials).note.find("not an index list") != std::string::npos);

    note.clear();
    CHECK(read_nvidia_gpus(root + "/none", note).empty());
    CHECK(note.find("no GPU list at") != std::string::npos);
}

TEST_CASE("devices: unreadable driver entries are named in bus order, whatever order the directory lists them",
          "[devices]") {
    // The job log says which GPUs the driver could not describe: the same node, the same text.
    const jobtrail::test::TempDir tree("nvidia");
    const std::string& root = tree.path();
    const char* broken[] = {"0000:e1:00.0", "0000:1b:00.0", "0000:cb:00.0",
                            "0000:3b:00.0", "0000:9a:00.0", "0000:5d:00.0"};
    for (const char* bdf : broken) add_gpu(root, bdf, "garbage\n");
    add_gpu(root, "0000:4c:00.0", information(0, "0000:4c:00.0"));
    std::string note;
    CHECK(read_nvidia_gpus(root, note).size() == 1);
    CHECK(note ==
          "unreadable driver entries: 0000:1b:00.0,0000:3b:00.0,0000:5d:00.0,0000:9a:00.0,0000:cb:00.0,0000:e1:00.0");
}

TEST_CASE("devices: OOM kill lines of recent kernels name the job's cgroup", "[devices]") {
    // cgroup v1 (Slurm's /slurm/uid_N/job_N/step_N/task_N), kernel 5.x
    auto k =
        oom("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
            "oom_memcg=/slurm/uid_1000/job_4243,task_memcg=/slurm/uid_1000/job_4243/step_0/task_0,task=python3,"
            "pid=81234,uid=1000");
    CHECK(k.job_id == "4243");
    CHECK(k.pid == 81234);
    // cgroup v2 (slurmstepd.scope), kernel 6.x
    k =
        oom("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
            "oom_memcg=/system.slice/slurmstepd.scope/job_77,task_memcg=/system.slice/slurmstepd.scope/job_77/"
            "step_batch/user/task_0,task=train,pid=5,uid=0");
    CHECK(k.job_id == "77");
    // A global OOM (no memcg) names no job.
    k =
        oom("oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0,global_oom,"
            "task_memcg=/system.slice/foo.service,task=foo,pid=9,uid=0");
    CHECK(k.job_id.empty());
    CHECK(k.pid == 9);
    // A comm chosen to look like another job's cgroup and pid changes nothing.
    k =
        oom("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
            "oom_memcg=/slurm/uid_5/job_10,task_memcg=/slurm/uid_5/job_10/step_0/task_0,"
            "task=x,task_memcg=/slurm/job_99/,pid=1,pid=700,uid=5");
    CHECK(k.job_id == "10");
    CHECK(k.pid == 700);
    // A job's own sub-cgroup deeper in the path is not a job.
    CHECK(oom("oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/slurm/uid_5/job_10,"
              "task_memcg=/slurm/uid_5/job_10/step_0/task_0/job_99,task=x,pid=2,uid=5")
              .job_id == "10");
    CHECK(oom("Out of memory: Killed process 1 (x)").job_id.empty());
    CHECK(killed_pid("Memory cgroup out of memory: Killed process 81234 (python3) total-vm:1kB") == 81234);
    CHECK(killed_pid("Out of memory: Killed process 12 (a b)") == 12);
    CHECK(killed_pid("segfault: Killed process 12") == -1);
    CHECK(killed_pid("audit: exe=/home/u/Out of memory Killed process 12") == -1);
    CHECK(killed_pid("Out of memory (oom_kill_allocating_task): Killed process 33 (x)") == 33);
    // A job's own sub-cgroup named to look like a field and another job is not read.
    CHECK(oom("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
              "oom_memcg=/slurm/uid_5/job_10/step_0/x,task_memcg=/job_7,task_memcg=/slurm/uid_5/job_10/"
              "step_0,task=x,pid=2,uid=5")
              .job_id == "10");
}

TEST_CASE("devices: a record is the device owner's, the memcg's, or every running job's", "[devices]") {
    Attributor a;
    a.upsert("1", "0", 100, 0, {gpu(0, "0000:1b:00.0")}, "");
    a.upsert("2", "0", 100, 0, {gpu(1, "0000:3b:00.0")}, "");
    a.upsert("3", "0", 200, 500, {gpu(2, "0000:5d:00.0")}, "");

    auto r = a.attribute(300, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", "0000:3b:00");
    CHECK(r.basis == Basis::kDevice);
    CHECK(r.owner == "2");
    CHECK(r.running == std::vector<std::string>{"1", "2", "3"});
    REQUIRE(r.device);
    CHECK(r.device->index == 1);
    CHECK(r.jobs() == std::vector<std::string>{"2"});

    // Job 3 ended at 500: a record of 499 on its GPU is still its own, one of 501 is nobody's.
    CHECK(a.attribute(499, "NVRM: Xid (PCI:0000:5d:00): 13, x", "0000:5d:00").owner == "3");
    r = a.attribute(501, "NVRM: Xid (PCI:0000:5d:00): 13, x", "0000:5d:00");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.owner.empty());
    CHECK(r.jobs() == std::vector<std::string>{"1", "2"});
    CHECK(r.note == "0000:5d:00 is no running job's device");

    // An HCA no job was given concerns every job running.
    r = a.attribute(300, "mlx5_core 0000:5e:00.0: health compromised", "0000:5e:00.0");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.jobs() == std::vector<std::string>{"1", "2", "3"});

    // The oom-kill line, and the "Killed process" record after it, are the cgroup's job.
    r = a.attribute(300,
                    "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
                    "oom_memcg=/slurm/uid_0/job_3,task_memcg=/slurm/uid_0/job_3/step_0/task_0,task=eat,pid=4040,uid=0",
                    "");
    CHECK(r.basis == Basis::kMemcg);
    CHECK(r.owner == "3");
    CHECK(a.attribute(300, "Memory cgroup out of memory: Killed process 4040 (eat) total-vm:10kB", "").owner == "3");
    // An unrelated kill of another pid is node-wide; a memcg of a job this node never ran too.
    CHECK(a.attribute(300, "Out of memory: Killed process 4041 (eat)", "").basis == Basis::kNode);
    CHECK(a.attribute(
               300, "oom-kill:constraint=CONSTRAINT_MEMCG,task_memcg=/slurm/uid_0/job_9/step_0,task=e,pid=1,uid=0", "")
              .basis == Basis::kNode);

    // Missing device data: node-wide, and said so.
    a.upsert("4", "0", 100, 0, {}, "the driver lists no GPU with minor 3");
    r = a.attribute(300, "NVRM: Xid (PCI:0000:86:00): 48, x", "0000:86:00");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note.find("devices unknown for job 4: the driver lists no GPU with minor 3") != std::string::npos);
    CHECK(a.owner_of("0000:1b:00.0", 300) == "1");
    // A stale marker (its epilog never ran) and a new job on the same GPU: the new job's.
    a.upsert("1002", "0", 250, 0, {gpu(0, "0000:1b:00.0")}, "");
    CHECK(a.attribute(300, "NVRM: Xid (PCI:0000:1b:00): 79, x", "0000:1b:00").owner == "1002");
    CHECK(a.attribute(200, "NVRM: Xid (PCI:0000:1b:00): 79, x", "0000:1b:00").owner == "1");
    CHECK(a.owner_of("0000:1b:00.0", 300) == "1002");
    CHECK(a.owner_of("0000:1b:00.0", 50).empty());
}

TEST_CASE("devices: slurmd -G lines give Slurm's GPU index to device file", "[devices]") {
    const auto f = parse_gres_gpu_files(
        {"slurmd: Gres Name=gpu Type=(null) Count=3 Index=0 ID=7696487 File=/tmp/d/nvidia[4-6] (null)",
         "slurmd: Gres Name=gpu Type=h100 Count=2 Index=3 ID=7696487 File=/dev/nvidia0,/dev/nvidia2 Cores=0-7",
         "slurmd: Gres Name=mps Count=100 Index=0 ID=1 File=/dev/nvidia0", "garbage"});
    REQUIRE(f.size() == 5);
    CHECK(f.at(0) == "/tmp/d/nvidia4");
    CHECK(f.at(2) == "/tmp/d/nvidia6");
    CHECK(f.at(3) == "/dev/nvidia0");
    CHECK(f.at(4) == "/dev/nvidia2");
    CHECK(expand_file_list("/dev/nvidia[08-10]") ==
          std::vector<std::string>{"/dev/nvidia08", "/dev/nvidia09", "/dev/nvidia10"});
    CHECK(expand_file_list("/dev/nvidia[0-1").empty());
    CHECK(expand_file_list("/dev/nvidia[0-99999]").empty());
    CHECK(expand_file_list("a,,b").empty());
}

// What Debian's slurmd 22.05.8 printed for `slurmd -G` with each gres.conf form (Gres=gpu:3, or
// gpu:h100:2,gpu:a100:1): Index= is the number the File= ends in, not the position Slurm hands
// out in SLURM_JOB_GPUS, which counts the files in the order the records are listed.
TEST_CASE("devices: every gres.conf form maps Slurm's GPU index to the right file", "[devices]") {
    using Files = std::map<int, std::string>;
    SECTION("one range") {
        CHECK(parse_gres_gpu_files({"slurmd-vm: Gres Name=gpu Type=(null) Count=3 Index=0 ID=7696487 "
                                    "File=/tmp/gres22/dev/nvidia[4-6] (null)"}) ==
              Files{{0, "/tmp/gres22/dev/nvidia4"}, {1, "/tmp/gres22/dev/nvidia5"}, {2, "/tmp/gres22/dev/nvidia6"}});
    }
    SECTION("one line per device") {
        CHECK(
            parse_gres_gpu_files(
                {"slurmd-vm: Gres Name=gpu Type=(null) Count=1 Index=4 ID=7696487 File=/tmp/gres22/dev/nvidia4 (null)",
                 "slurmd-vm: Gres Name=gpu Type=(null) Count=1 Index=5 ID=7696487 File=/tmp/gres22/dev/nvidia5 (null)",
                 "slurmd-vm: Gres Name=gpu Type=(null) Count=1 Index=6 ID=7696487 File=/tmp/gres22/dev/nvidia6 "
                 "(null)"}) ==
            Files{{0, "/tmp/gres22/dev/nvidia4"}, {1, "/tmp/gres22/dev/nvidia5"}, {2, "/tmp/gres22/dev/nvidia6"}});
    }
    SECTION("one line per device, not in the files' order") {
        CHECK(
            parse_gres_gpu_files(
                {"slurmd-vm: Gres Name=gpu Type=(null) Count=1 Index=6 ID=7696487 File=/tmp/gres22/dev/nvidia6 (null)",
                 "slurmd-vm: Gres Name=gpu Type=(null) Count=1 Index=4 ID=7696487 File=/tmp/gres22/dev/nvidia4 (null)",
                 "slurmd-vm: Gres Name=gpu Type=(null) Count=1 Index=5 ID=7696487 File=/tmp/gres22/dev/nvidia5 "
                 "(null)"}) ==
            Files{{0, "/tmp/gres22/dev/nvidia6"}, {1, "/tmp/gres22/dev/nvidia4"}, {2, "/tmp/gres22/dev/nvidia5"}});
    }
    SECTION("typed lines") {
        CHECK(parse_gres_gpu_files({"slurmd-vm: Gres Name=gpu Type=h100 Count=2 Index=0 ID=7696487 "
                                    "File=/tmp/gres22/dev/nvidia[4-5] (null)",
                                    "slurmd-vm: Gres Name=gpu Type=a100 Count=1 Index=6 ID=7696487 "
                                    "File=/tmp/gres22/dev/nvidia6 (null)"}) ==
              Files{{0, "/tmp/gres22/dev/nvidia4"}, {1, "/tmp/gres22/dev/nvidia5"}, {2, "/tmp/gres22/dev/nvidia6"}});
    }
    SECTION("Slurm 25.11.7's slurmd -G, one line per device and typed lines") {
        // What SchedMD's 25.11.7 printed (log lines with their time; cgroup warnings before them).
        CHECK(parse_gres_gpu_files(
                  {"[2026-12-03T08:34:03.516] warning: cgroup/v1 plugin is deprecated, please upgrade to cgroup/v2",
                   "[2026-12-03T08:34:03.532] Gres Name=gpu Type=(null) Count=1 Index=6 ID=7696487 "
                   "File=/tmp/gres25/dev/nvidia6 Links=(null) Flags=HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,"
                   "ENV_DEFAULT",
                   "[2026-12-03T08:34:03.532] Gres Name=gpu Type=(null) Count=1 Index=4 ID=7696487 "
                   "File=/tmp/gres25/dev/nvidia4 Links=(null) Flags=HAS_FILE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,ENV_OPENCL,"
                   "ENV_DEFAULT"}) == Files{{0, "/tmp/gres25/dev/nvidia6"}, {1, "/tmp/gres25/dev/nvidia4"}});
        CHECK(parse_gres_gpu_files(
                  {"[2026-12-03T08:34:03.597] Gres Name=gpu Type=h100 Count=2 Index=0 ID=7696487 "
                   "File=/tmp/gres25/dev/nvidia[5-6] Links=(null) Flags=HAS_FILE,HAS_TYPE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,"
                   "ENV_OPENCL,ENV_DEFAULT",
                   "[2026-12-03T08:34:03.597] Gres Name=gpu Type=a100 Count=1 Index=4 ID=7696487 "
                   "File=/tmp/gres25/dev/nvidia4 Links=(null) Flags=HAS_FILE,HAS_TYPE,ENV_NVML,ENV_RSMI,ENV_ONEAPI,"
                   "ENV_OPENCL,ENV_DEFAULT"}) ==
              Files{{0, "/tmp/gres25/dev/nvidia5"}, {1, "/tmp/gres25/dev/nvidia6"}, {2, "/tmp/gres25/dev/nvidia4"}});
    }
    SECTION("a record without its file ends the mapping there, and says why") {
        std::string why;
        CHECK(parse_gres_gpu_files({"slurmd-vm: Gres Name=gpu Type=h100 Count=1 Index=4 ID=7696487 "
                                    "File=/dev/nvidia4 (null)",
                                    "slurmd: Gres Name=gpu Type=h100 Count=2 Flags=HAS_TYPE,ENV_NVML",
                                    "slurmd-vm: Gres Name=gpu Type=a100 Count=1 Index=6 ID=7696487 "
                                    "File=/dev/nvidia6 (null)"},
                                   &why) == Files{{0, "/dev/nvidia4"}});
        CHECK(why.find("no device file") != std::string::npos);
    }
    SECTION("a MIG slice is never taken for a whole GPU") {
        std::string why;
        CHECK(parse_gres_gpu_files(
                  {"slurmd: Gres Name=gpu Type=1g.10gb Count=1 Index=0 ID=7696487 "
                   "File=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap21 Links=(null) Flags=HAS_FILE,HAS_TYPE,"
                   "ENV_NVML,MIG"},
                  &why)
                  .empty());
        CHECK(why.find("MIG") != std::string::npos);
    }
    SECTION("MultipleFiles: one GPU in several files is not several GPUs") {
        std::string why;
        CHECK(parse_gres_gpu_files(
                  {"slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 "
                   "File=/dev/nvidia0,/dev/nvidia-caps/cap1 (null)",
                   "slurmd: Gres Name=gpu Type=(null) Count=1 Index=1 ID=7696487 File=/dev/nvidia1 (null)"},
                  &why)
                  .empty());
        CHECK(!why.empty());
    }
}

TEST_CASE("devices: an OOM kill is a job's only under Slurm's cgroup root and for the job's own user", "[devices]") {
    Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");  // alice's job
    a.upsert("4343", "1001", 100, 0, {}, "");  // mallory's job
    const auto kill = [](const std::string& memcg, int pid, int uid) {
        return "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=" + memcg +
               ",task_memcg=" + memcg + "/step_0/user/task_0,task=eat,pid=" + std::to_string(pid) +
               ",uid=" + std::to_string(uid);
    };
    // mallory makes job_4242 in her own systemd-delegated subtree and gets a task there killed.
    auto r = a.attribute(300, kill("/user.slice/user-1001.slice/user@1001.service/job_4242", 5050, 1001), "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.owner.empty());
    CHECK(r.note ==
          "not attributed: memory cgroup /user.slice/user-1001.slice/user@1001.service/job_4242 is not under Slurm's "
          "cgroup root (collector.slurm_cgroup_roots)");
    r = a.attribute(301, "Memory cgroup out of memory: Killed process 5050 (eat) total-vm:10kB", "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.jobs() == std::vector<std::string>{"4242", "4343"});
    CHECK(r.note.substr(0, 16) == "not attributed: ");

    // Under Slurm's root, but the kernel killed a task of another user than the job's.
    r = a.attribute(302, kill("/system.slice/slurmstepd.scope/job_4242", 5051, 1001), "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note == "not attributed: the kernel's uid=1001 is not job 4242's user (uid 1000)");
    // cgroup v1: the path's uid_ is another user's.
    r = a.attribute(303, kill("/slurm/uid_1001/job_4242", 5052, 1000), "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note == "not attributed: the cgroup's uid_1001 is not job 4242's user (uid 1000)");
    // A job_ deeper under the root than Slurm puts it (a job's own sub-cgroup) is not that job.
    r = a.attribute(304, kill("/system.slice/slurmstepd.scope/job_4343/step_0/user/job_4242", 5053, 1001), "");
    CHECK(r.owner == "4343");

    // The right one: Slurm's cgroup of the job, a task of its user.
    for (const std::string memcg : {"/system.slice/slurmstepd.scope/job_4242", "/slurm/uid_1000/job_4242"}) {
        r = a.attribute(305, kill(memcg, 5054, 1000), "");
        CHECK(r.basis == Basis::kMemcg);
        CHECK(r.owner == "4242");
        CHECK(r.note.empty());
        CHECK(a.attribute(306, "Memory cgroup out of memory: Killed process 5054 (eat) total-vm:10kB", "").owner ==
              "4242");
    }
    // A job whose user is unknown (a marker without uid) gets no OOM kill.
    a.upsert("4444", "", 100, 0, {}, "");
    r = a.attribute(307, kill("/system.slice/slurmstepd.scope/job_4444", 5055, 1000), "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note == "not attributed: job 4444's user is unknown");

    // A site whose slurmd runs as several nodes (<node>_slurmstepd.scope) configures its root.
    Attributor multi({"/system.slice/n1_slurmstepd.scope"});
    multi.upsert("4242", "1000", 100, 0, {}, "");
    CHECK(multi.attribute(300, kill("/system.slice/n1_slurmstepd.scope/job_4242", 1, 1000), "").owner == "4242");
    CHECK(multi.attribute(300, kill("/system.slice/slurmstepd.scope/job_4242", 2, 1000), "").owner.empty());
    CHECK(multi.attribute(300, kill("/system.slice/n1_slurmstepd.scope2/job_4242", 3, 1000), "").owner.empty());
}

TEST_CASE("devices: 64 GPUs the driver lists are read, past 64 the rest are ignored and that is said", "[devices]") {
    const jobtrail::test::TempDir tree("nvidia");
    const std::string& root = tree.path();
    const auto bdf = [](int i) {
        char b[16];
        std::snprintf(b, sizeof b, "0000:%02x:00.0", i + 1);
        return std::string(b);
    };
    for (int i = 0; i < 64; ++i) add_gpu(root, bdf(i), information(i, bdf(i)));
    std::string note;
    CHECK(read_nvidia_gpus(root, note).size() == 64);
    CHECK(note.empty());
    add_gpu(root, bdf(64), information(64, bdf(64)));
    const auto gpus = read_nvidia_gpus(root, note);
    CHECK(gpus.size() == 64);
    CHECK(note == "more than 64 GPUs under " + root + "/gpus; the rest ignored");
}

TEST_CASE("devices: nvidia-smi's serials are taken for 64 GPUs, no more", "[devices]") {
    std::vector<std::string> csv = {"index, pci.bus_id, serial"};
    for (int i = 0; i < 65; ++i) {
        char row[64];
        std::snprintf(row, sizeof row, "%d, 00000000:%02X:00.0, 16509230%05d", i, i + 1, i);
        csv.emplace_back(row);
    }
    const auto serials = serials_from_smi_csv(csv);
    CHECK(serials.size() == 64);
    CHECK(serials.at("0000:40:00") == "1650923000063");  // the 64th row
    CHECK(serials.count("0000:41:00") == 0);             // the 65th
}

TEST_CASE("devices: Slurm index lists and device file lists hold up to 256 GPUs, one more is refused", "[devices]") {
    const auto all = parse_index_list("0-255");
    REQUIRE(all);
    CHECK(all->size() == 256);
    CHECK(all->back() == 255);
    CHECK_FALSE(parse_index_list("0-255,256"));
    CHECK_FALSE(parse_index_list("0-256"));

    CHECK(expand_file_list("/dev/nvidia[0-255]").size() == 256);
    CHECK(expand_file_list("/dev/nvidia[0-256]").empty());
    CHECK(expand_file_list("/dev/nvidia[0-255],/dev/nvidia256").empty());

    std::string why;
    const std::string full = "slurmd: Gres Name=gpu Type=(null) Count=256 Index=0 ID=7696487 File=/dev/nvidia[0-255]";
    auto f = parse_gres_gpu_files({full}, &why);
    CHECK(f.size() == 256);
    CHECK(f.at(255) == "/dev/nvidia255");
    CHECK(why.empty());
    f = parse_gres_gpu_files(
        {full, "slurmd: Gres Name=gpu Type=(null) Count=1 Index=256 ID=7696487 File=/dev/nvidia256"}, &why);
    CHECK(f.size() == 256);
    CHECK(why == "more than 256 GPUs");
}

TEST_CASE("devices: the kernel's 'Killed process' line finds the memory cgroup of any of the last 64 OOM kills",
          "[devices]") {
    Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");
    const auto kill = [](int pid) {
        return "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/slurm/uid_1000/"
               "job_4242,task_memcg=/slurm/uid_1000/job_4242/step_0,task=eat,pid=" +
               std::to_string(pid) + ",uid=1000";
    };
    const auto killed = [](int pid) {
        return "Memory cgroup out of memory: Killed process " + std::to_string(pid) + " (eat) total-vm:10kB";
    };
    // 65 OOM kills, pids 5001..5065, before their "Killed process" lines.
    for (int pid = 5001; pid <= 5065; ++pid) REQUIRE(a.attribute(300, kill(pid), "").owner == "4242");
    auto r = a.attribute(301, killed(5002), "");  // the 64th back
    CHECK(r.basis == Basis::kMemcg);
    CHECK(r.owner == "4242");
    r = a.attribute(301, killed(5001), "");  // the 65th back: forgotten, node-wide
    CHECK(r.basis == Basis::kNode);
    CHECK(r.owner.empty());
}

namespace {

std::string oom_line(const std::string& memcg, const std::string& tail) {
    return "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=" + memcg +
           ",task_memcg=" + memcg + "/step_0/user/task_0" + tail;
}

}  // namespace

TEST_CASE("devices: the kernel's uid is compared to the job's user when it is ten digits or fewer", "[devices]") {
    Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");
    const std::string memcg = "/system.slice/slurmstepd.scope/job_4242";
    auto r = a.attribute(300, oom_line(memcg, ",task=eat,pid=5,uid=1009"), "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note == "not attributed: the kernel's uid=1009 is not job 4242's user (uid 1000)");
    r = a.attribute(300, oom_line(memcg, ",task=eat,pid=6,uid=4294967294"), "");
    CHECK(r.note == "not attributed: the kernel's uid=4294967294 is not job 4242's user (uid 1000)");
    // What is not a uid (eleven digits, a letter, nothing) is not compared.
    for (const char* uid : {"10000000000", "1000x", ""}) {
        INFO(uid);
        r = a.attribute(300, oom_line(memcg, std::string(",task=eat,pid=7,uid=") + uid), "");
        CHECK(r.basis == Basis::kMemcg);
        CHECK(r.owner == "4242");
    }
    // cgroup v1's uid_ the same way; "uid_" alone is no uid, and the job below it is not read.
    r = a.attribute(300, oom_line("/slurm/uid_4294967294/job_4242", ",task=eat,pid=8,uid=1000"), "");
    CHECK(r.note == "not attributed: the cgroup's uid_4294967294 is not job 4242's user (uid 1000)");
    r = a.attribute(300, oom_line("/slurm/uid_/job_4242", ",task=eat,pid=9,uid=1000"), "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.owner.empty());
}

TEST_CASE("devices: a memory cgroup is a job's only right below a configured root", "[devices][hostile]") {
    Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");
    for (const std::string memcg : {"/job_4242", "/other/job_4242", "/slurmx/job_4242"}) {
        INFO(memcg);
        const auto r = a.attribute(300, oom_line(memcg, ",task=eat,pid=5,uid=1000"), "");
        CHECK(r.basis == Basis::kNode);
        CHECK(r.note == "not attributed: memory cgroup " + memcg +
                            " is not under Slurm's cgroup root (collector.slurm_cgroup_roots)");
    }
    // A root given with a trailing '/', and '/' itself.
    Attributor slash({"/slurm/"});
    slash.upsert("4242", "1000", 100, 0, {}, "");
    CHECK(slash.attribute(300, oom_line("/slurm/uid_1000/job_4242", ",task=eat,pid=5,uid=1000"), "").owner == "4242");
    Attributor top({"/"});
    top.upsert("4242", "1000", 100, 0, {}, "");
    CHECK(top.attribute(300, oom_line("/job_4242", ",task=eat,pid=5,uid=1000"), "").owner == "4242");
    CHECK(top.attribute(300, oom_line("/x/job_4242", ",task=eat,pid=6,uid=1000"), "").owner.empty());
}

TEST_CASE("devices: an OOM kill line's fields are read where the kernel writes them", "[devices][hostile]") {
    const auto roots = default_slurm_cgroup_roots();
    // A cpuset name is the user's: one that ends in "oom_memcg=/..." is not the field.
    auto k = parse_oom_kill(
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=xoom_memcg=/slurm/uid_1000/job_99,mems_allowed=0,"
        "oom_memcg=/slurm/uid_1000/job_42,task_memcg=/slurm/uid_1000/job_42/step_0,task=eat,pid=5,uid=1000",
        roots);
    CHECK(k.job_id == "42");
    // An oom_memcg that is not a path gives way to task_memcg.
    k = parse_oom_kill(
        "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=(null),task_memcg=/slurm/uid_1000/job_42/step_0,task=e,pid=5",
        roots);
    CHECK(k.job_id == "42");
    CHECK(k.pid == 5);
    CHECK(k.uid.empty());
    // pid=0 is no process; a ",pid=" only before task= is a cgroup's name, not the kernel's pid.
    CHECK(
        parse_oom_kill("oom-kill:constraint=CONSTRAINT_NONE,global_oom,task_memcg=/a,task=e,pid=0,uid=0", roots).pid ==
        -1);
    k = parse_oom_kill(
        "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/slurm/uid_1000/job_42,task_memcg=/slurm/"
        "uid_1000/job_42/x,pid=77,task=e",
        roots);
    CHECK(k.job_id == "42");
    CHECK(k.pid == -1);
    // A path that ends in '/' and names no job.
    k = parse_oom_kill("oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/user.slice/x/,task=e,pid=3,uid=0", roots);
    CHECK(k.job_id.empty());
    CHECK(k.refused.empty());
    CHECK(killed_pid("Out of memory: Killed process 0 (x)") == -1);
    CHECK(killed_pid("Out of memory (oom_kill_allocating_task) for pid 5") == -1);
}

TEST_CASE("devices: an OOM kill line without a pid still names its job or says why not", "[devices]") {
    Attributor a;
    a.upsert("4242", "1000", 100, 0, {}, "");
    auto r = a.attribute(300, "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/slurm/uid_1000/job_4242", "");
    CHECK(r.basis == Basis::kMemcg);
    CHECK(r.owner == "4242");
    r = a.attribute(300, "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/user.slice/job_4242", "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note ==
          "not attributed: memory cgroup /user.slice/job_4242 is not under Slurm's cgroup root "
          "(collector.slurm_cgroup_roots)");
    // A global OOM is node-wide with nothing to explain; a job this node never ran is said.
    r = a.attribute(300, "oom-kill:constraint=CONSTRAINT_NONE,global_oom,task_memcg=/system.slice/x,task=e,pid=9,uid=0",
                    "");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note.empty());
    r = a.attribute(300, oom_line("/slurm/uid_1000/job_9", ",task=eat,pid=10,uid=1000"), "");
    CHECK(r.note == "not attributed: job 9 of its memory cgroup did not run on this node");
}

TEST_CASE("devices: a job's devices are those of its latest marker and two equal claims agree", "[devices]") {
    Attributor a;
    a.upsert("1", "0", 100, 0, {gpu(0, "0000:1b:00.0")}, "");
    a.upsert("1", "0", 100, 0, {gpu(1, "0000:3b:00.0")}, "");
    REQUIRE(a.devices_of("1"));
    CHECK(a.devices_of("1")->size() == 1);
    CHECK(a.devices_of("2") == nullptr);
    CHECK(a.attribute(300, "NVRM: Xid (PCI:0000:1b:00): 79, x", "0000:1b:00").basis == Basis::kNode);
    CHECK(a.owner_of("0000:1b:00.0", 300).empty());
    CHECK(a.attribute(300, "NVRM: Xid (PCI:0000:3b:00): 79, x", "0000:3b:00").owner == "1");

    // Two markers on one GPU with the same start: the record and owner_of name the same job.
    a.upsert("2", "0", 100, 0, {gpu(1, "0000:3b:00.0")}, "");
    const auto r = a.attribute(300, "NVRM: Xid (PCI:0000:3b:00): 79, x", "0000:3b:00");
    CHECK(r.owner == "2");
    CHECK(a.owner_of("0000:3b:00.0", 300) == r.owner);
    CHECK(a.owner_of("garbage", 300).empty());
    const auto bad = a.attribute(300, "NVRM: Xid (PCI:zz): 79, x", "zz");
    CHECK(bad.basis == Basis::kNode);
    CHECK(bad.note == "zz is no running job's device");
}

TEST_CASE("devices: a node-wide device record names every running job whose devices are unknown", "[devices]") {
    Attributor a;
    a.upsert("1", "0", 100, 0, {gpu(0, "0000:1b:00.0")}, "");
    a.upsert("4", "0", 100, 0, {}, "the driver lists no GPU with minor 3");
    a.upsert("5", "0", 100, 0, {}, "no device file known for Slurm GPU index 2");
    a.upsert("6", "0", 100, 200, {}, "ended before the record");
    const auto r = a.attribute(300, "NVRM: Xid (PCI:0000:86:00): 48, x", "0000:86:00");
    CHECK(r.basis == Basis::kNode);
    CHECK(r.note ==
          "0000:86:00 is no running job's device (devices unknown for job 4: the driver lists no GPU with minor 3, "
          "5: no device file known for Slurm GPU index 2)");
}

TEST_CASE("devices: PCI functions 0 to 7 and domains of 4 or 8 digits make a key and nothing else does", "[devices]") {
    CHECK(bdf_key("0000:3b:00.7") == "0000:3b:00");
    CHECK(bdf_key(" 0000:3b:00.0\n") == "0000:3b:00");
    CHECK(bdf_key("0000:3b:00.8").empty());
    CHECK(bdf_key("0000:3b:00.10").empty());
    CHECK(bdf_key("0000:3b:00.").empty());
    CHECK(bdf_key("00010000:3b:00.0").empty());
    CHECK(bdf_key("000:3b:00").empty());
    CHECK(bdf_key("0000:3:00").empty());
    CHECK(bdf_key("0000:3b:000").empty());
    CHECK(bdf_key("0000:3g:00").empty());
    CHECK(bdf_key("0000:3b:0g").empty());
    CHECK(bdf_key("0000:0000:3b:00").empty());
    CHECK(bdf_key("ABCD:EF:1F.0") == "abcd:ef:1f");
}

TEST_CASE("devices: index lists take up to seven digits a number and each index once", "[devices]") {
    CHECK(*parse_index_list(" 1, 1,0-2 ") == std::vector<int>{1, 0, 2});
    CHECK(*parse_index_list("1234567") == std::vector<int>{1234567});
    CHECK_FALSE(parse_index_list("12345678"));
    CHECK(*parse_index_list("7-7") == std::vector<int>{7});
    CHECK_FALSE(parse_index_list("1,"));
    CHECK_FALSE(parse_index_list("1-"));
    CHECK_FALSE(parse_index_list("-"));
    CHECK_FALSE(parse_index_list("1-2-3"));
}

TEST_CASE("devices: device file lists split at commas outside brackets and keep a prefix and suffix", "[devices]") {
    CHECK(expand_file_list("/dev/nvidia[0,2-3]") ==
          std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia2", "/dev/nvidia3"});
    CHECK(expand_file_list(" /dev/nvidia[1-2]x,/dev/nvidia7 ") ==
          std::vector<std::string>{"/dev/nvidia1x", "/dev/nvidia2x", "/dev/nvidia7"});
    CHECK(expand_file_list("/dev/nvidia[8]") == std::vector<std::string>{"/dev/nvidia8"});
    CHECK(expand_file_list("/dev/nvidia[3-3]") == std::vector<std::string>{"/dev/nvidia3"});
    CHECK(expand_file_list("/dev/nvidia[007]") == std::vector<std::string>{"/dev/nvidia007"});
    for (const char* bad : {"", "a,", ",a", "/dev/nvidia[[0]]", "/dev/nvidia0]", "/dev/nvidia[]", "/dev/nvidia[2-1]",
                            "/dev/nvidia[1-]", "/dev/nvidia[x]", "/dev/nvidia]0["}) {
        INFO(bad);
        CHECK(expand_file_list(bad).empty());
    }
}

TEST_CASE("devices: nvidia-smi serials are taken only from rows with a bus id and a plain serial", "[devices]") {
    const auto serials = serials_from_smi_csv({"serial, name, pci.bus_id", "A-1, x, 00000000:01:00.0", "short",
                                               "B_2, x, 00000000:02:00.0", ", x, 00000000:03:00.0",
                                               std::string(64, 'c') + ", x, 00000000:04:00.0",
                                               std::string(65, 'd') + ", x, 00000000:05:00.0", "E5, x, nonsense"});
    CHECK(serials == std::map<std::string, std::string>{{"0000:01:00", "A-1"}, {"0000:04:00", std::string(64, 'c')}});
    // The columns in any order, the bus id first or the serial; a row short of either is skipped.
    CHECK(serials_from_smi_csv({"pci.bus_id, index, serial", "00000000:01:00.0, 0, S1", "00000000:02:00.0, 1"}) ==
          std::map<std::string, std::string>{{"0000:01:00", "S1"}});
    CHECK(serials_from_smi_csv({"index, pci.bus_id", "0, 00000000:01:00.0"}).empty());
    CHECK(serials_from_smi_csv({"index, serial", "0, 1650923004567"}).empty());
}

TEST_CASE("devices: a GPU record with no file or a count that is no number ends the mapping", "[devices]") {
    std::string why;
    CHECK(parse_gres_gpu_files({"slurmd: Gres Name=gpu Type=(null) Count=1 Index=0 ID=7696487 File=(null)"}, &why)
              .empty());
    CHECK(why.find("no device file") != std::string::npos);
    CHECK(parse_gres_gpu_files({"slurmd: Gres Name=gpu Count=x Index=0 ID=7696487 File=/dev/nvidia0"}, &why).empty());
    CHECK(why == "a GPU record of x devices in 1 files");
    CHECK(parse_gres_gpu_files({"slurmd: Gres Name=gpu Count=1 Index=0 ID=7696487 File=/dev/nvidia[0"}, &why).empty());
    CHECK(why == "a GPU record of 1 devices in 0 files");
    // Not a Gres line, or not a GPU's: skipped.
    CHECK(parse_gres_gpu_files({"slurmd: Name=gpu Count=1 File=/dev/nvidia0",
                                "slurmd: Gres Name=gpu Count=1 Index=0 File=/dev/nvidia1"}) ==
          std::map<int, std::string>{{0, "/dev/nvidia1"}});
}

TEST_CASE("devices: a job's GPUs that cannot all be resolved are named in one note", "[devices]") {
    const std::vector<GpuInfo> gpus = {{0, "0000:1b:00.0", "GPU-a", "H100"}};
    const auto r = resolve_job_gpus("0,2,3,4,5", {{0, 0}, {4, 7}, {5, 8}}, gpus, {});
    REQUIRE(r.devices.size() == 1);
    CHECK(r.devices[0].uuid == "GPU-a");
    CHECK(r.note == "no device file known for Slurm GPU index 2,3; the driver lists no GPU with minor 7,8");
    CHECK(resolve_job_gpus("0,x", {}, gpus, {}).note == "SLURM_JOB_GPUS=0,x is not an index list");
    CHECK(resolve_job_gpus(" ", {}, gpus, {}).note.empty());
    CHECK(describe(JobDevice{"nic", 2, "0000:5e:00.0", "", ""}) == "nic 2 (0000:5e:00.0)");
    CHECK(describe(gpu(1, "0000:3b:00.0")) == "GPU 1 (0000:3b:00.0)");
}

TEST_CASE("devices: a driver entry whose name starts with a dot is not a GPU", "[devices]") {
    const jobtrail::test::TempDir tree("nvidia");
    const std::string& root = tree.path();
    add_gpu(root, "0000:1b:00.0", information(1, "0000:1b:00.0"));
    add_gpu(root, ".hidden", "garbage\n");
    add_gpu(root, "0000:3b:00.0", information(0, "0000:3b:00.0"));
    std::string note;
    const auto gpus = read_nvidia_gpus(root, note);
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].minor == 0);
    CHECK(gpus[1].minor == 1);
    CHECK(note.empty());
}
