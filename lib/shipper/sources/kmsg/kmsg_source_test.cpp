#include "shipper/sources/kmsg/kmsg_source.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>

#include "kmsgfs_mount.hpp"

using namespace jobtrail::shipper;

namespace {

// A kmsg fixture, a boot clock and the checkpoint a pipeline would keep between runs.
struct Env {
    jobtrail::test::KmsgfsMount fs;
    jobtrail::test::TempDir state;
    jobtrail::kmsg::BootClock clock;
    Metrics m;
    nlohmann::json saved;

    Env() { REQUIRE(clock.load(state.path())); }
    // One shipper run: restore, read everything, keep the checkpoint.
    std::vector<Event> run() {
        KmsgSource s(fs.kmsg(), clock, {"c", "n"}, m);
        s.restore(saved);
        std::vector<Event> out;
        while (s.poll(out, 1 << 20)) {
        }
        saved = s.checkpoint();
        return out;
    }
};

}  // namespace

TEST_CASE("kmsg: resume after a restart on the same boot, same timestamps, Xid metadata", "[shipper][fixture]") {
    Env env;
    env.fs.ctl(
        "6;first\n4;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n");
    const auto a = env.run();
    REQUIRE(a.size() == 2);
    CHECK(a[1].labels().at("priority") == "warning");
    bool xid = false;
    for (auto& [k, v] : a[1].metadata) xid |= k == "xid" && v == "79";
    CHECK(xid);
    env.fs.ctl("6;third\n");
    const auto b = env.run();
    REQUIRE(b.size() == 1);  // nothing twice
    CHECK(b[0].line == "third");
    // Read again from scratch (a lost checkpoint): the same records get the same nanoseconds,
    // so a re-send is identical and Loki drops it.
    env.saved = nlohmann::json::object();
    const auto c = env.run();
    REQUIRE(c.size() == 3);
    CHECK(c[0].ts_ns == a[0].ts_ns);
    CHECK(c[1].ts_ns == a[1].ts_ns);
    CHECK(c[2].ts_ns == b[0].ts_ns);
}

TEST_CASE("kmsg: a read error is said, the device opened again, and reading goes on after the last record shipped",
          "[shipper][fixture]") {
    // A read the device fails (EIO): the source cannot go on with that descriptor; it opens the
    // device again at its next pass and ships what came since, nothing twice, nothing lost.
    for (const bool restored : {false, true}) {
        INFO((restored ? "after a restart" : "from the first start"));
        Env env;
        env.fs.ctl("6;a\n");
        if (restored) env.run();  // `a` shipped by an earlier run: the checkpoint says so
        std::vector<std::string> said;
        KmsgSource s(env.fs.kmsg(), env.clock, {"c", "n"}, env.m,
                     Events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); }));
        s.restore(env.saved);
        std::vector<std::string> lines;
        auto pass = [&] {
            std::vector<Event> out;
            while (s.poll(out, 1 << 20)) {
            }
            for (auto& e : out) lines.push_back(e.line);
        };
        env.fs.ctl("6;b\n");
        pass();
        env.fs.ctl("!fail 1\n6;c\n");
        pass();  // the read fails
        pass();  // opened again
        env.fs.ctl("6;d\n");
        pass();
        CHECK(lines ==
              (restored ? std::vector<std::string>{"b", "c", "d"} : std::vector<std::string>{"a", "b", "c", "d"}));
        REQUIRE(said.size() == 2);
        CHECK(said[0].starts_with("read_failed: read from " + env.fs.kmsg() + ": Input/output error"));
        CHECK(said[1] == "opened: reading " + env.fs.kmsg() + " again");
    }
}

TEST_CASE("kmsg: records overwritten while the shipper was away become one loss line", "[shipper][fixture]") {
    Env env;
    env.fs.ctl("6;a\n");
    env.run();
    env.fs.ctl("6;b\n6;c\n6;d\n!drop 3\n");  // a, b, c gone; d stays
    const auto e = env.run();
    REQUIRE(e.size() == 2);
    CHECK(e[0].line == "jobtrail: 2 kernel records lost (sequence gap)");
    CHECK(e[1].line == "d");
}

TEST_CASE("kmsg: an Xid written to /dev/kmsg by a user process is shipped but not tagged",
          "[shipper][fixture][hostile]") {
    Env env;
    // prio 12 = user(1) << 3 | warning: what the kernel stamps on a write by root in a job.
    const std::string xid =
        "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.";
    env.fs.ctl("12;" + xid + "\n4;" + xid + "\n");
    const auto a = env.run();
    REQUIRE(a.size() == 2);
    auto tags = [](const Event& e) {
        std::string s;
        for (auto& [k, v] : e.metadata)
            if (k == "xid" || k == "event" || k == "severity") s += k + "=" + v + " ";
        return s;
    };
    CHECK(a[0].line == xid);
    CHECK(tags(a[0]).empty());
    CHECK(tags(a[1]) == "xid=79 event=xid severity=fatal ");
}

TEST_CASE("kmsg: identical records in one microsecond stay distinct, and a re-read is identical",
          "[shipper][fixture]") {
    Env env;
    const std::string mlx = "mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838: ACCESS_REG(0x805) op_mod(0x1) failed";
    env.fs.ctl("3,7000000;" + mlx + "\n3,7000000;" + mlx + "\n3,7000000;" + mlx + "\n");
    const auto a = env.run();
    REQUIRE(a.size() == 3);
    for (const auto& e : a) CHECK(e.line == mlx);
    // Same microsecond, yet three timestamps: Loki keeps one entry per (stream, time, line).
    CHECK(a[0].ts_ns / 1000 == a[2].ts_ns / 1000);
    CHECK(a[0].ts_ns < a[1].ts_ns);
    CHECK(a[1].ts_ns < a[2].ts_ns);
    // A restart that lost its checkpoint sends the very same entries: Loki drops them.
    env.saved = nlohmann::json::object();
    const auto b = env.run();
    REQUIRE(b.size() == 3);
    for (size_t i = 0; i < 3; ++i) {
        CHECK(b[i].ts_ns == a[i].ts_ns);
        CHECK(b[i].line == a[i].line);
    }
}

TEST_CASE("kmsg: a continuation record begun and another begun after it: both kernel lines arrive",
          "[shipper][fixture]") {
    // pr_cont lines: "c" begins a line, "+" continues it. A "c" right after a "c" (the first
    // line never continued) ends the first: it is a line of its own, not lost or merged.
    Env env;
    env.fs.ctl(
        "6,100,c;NVRM: GPU at PCI:0000:3b:00: GPU-1234\n"
        "6,101,c;mlx5_core 0000:5e:00.0: link down\n"
        "6,102,+; (port 1)\n"
        "6,103,c;last begun\n"
        "6,104,c;and begun again\n");
    const auto a = env.run();
    std::vector<std::string> lines;
    for (const auto& e : a) lines.push_back(e.line);
    CHECK(lines == std::vector<std::string>{"NVRM: GPU at PCI:0000:3b:00: GPU-1234",
                                            "mlx5_core 0000:5e:00.0: link down (port 1)", "last begun",
                                            "and begun again"});
}

TEST_CASE("kmsg: a pass's byte budget ending between a begun record and its continuation does not split the line",
          "[shipper][fixture]") {
    Env env;
    env.fs.ctl("6,100,c;GPU 0: temperature \n6,101,+;85C\n6,102,c;GPU 1: temperature \n6,103,+;86C\n");
    KmsgSource s(env.fs.kmsg(), env.clock, {"c", "n"}, env.m);
    std::vector<Event> out;
    for (int i = 0; i < 10 && s.poll(out, 1); ++i) {
    }
    std::vector<std::string> lines;
    for (const auto& e : out) lines.push_back(e.line);
    CHECK(lines == std::vector<std::string>{"GPU 0: temperature 85C", "GPU 1: temperature 86C"});
}

TEST_CASE("kmsg: a position saved on another boot is not used: every record of this boot's ring ships",
          "[shipper][fixture]") {
    Env env;
    env.fs.ctl("6;zero\n6;one\n6;two\n");
    // What the shipper saved before the node rebooted: far into the old boot's sequence.
    env.saved = {{"boot_id", "00000000-0000-0000-0000-000000000000"},
                 {"seq", 1u}};  // unsigned, as a checkpoint reads back
    auto lines = env.run();
    REQUIRE(lines.size() == 3);
    CHECK(lines[0].line == "zero");
    // The same boot's position is used: nothing twice.
    env.fs.ctl("6;three\n");
    lines = env.run();
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].line == "three");
    // A position that is no sequence number is not used either.
    for (const auto& bad :
         {nlohmann::json{{"boot_id", env.clock.boot_id()}, {"seq", -1}},
          nlohmann::json{{"boot_id", env.clock.boot_id()}, {"seq", "2"}}, nlohmann::json{{"boot_id", 7}, {"seq", 2u}},
          nlohmann::json{{"seq", 2u}}, nlohmann::json{{"boot_id", env.clock.boot_id()}}, nlohmann::json::array()}) {
        env.saved = bad;
        CHECK(env.run().size() == 4);
    }
}

TEST_CASE("kmsg: a device that cannot be opened is said once and polled without spinning and read once it appears",
          "[shipper][fixture]") {
    Env env;
    env.fs.ctl("6;waiting\n");
    const std::string path = env.state.path() + "/kmsg";  // not there yet
    std::vector<std::string> said;
    KmsgSource s(path, env.clock, {"c", "n"}, env.m,
                 Events([&](const InternalEvent& e) { said.push_back(e.name + ": " + e.message); }));
    std::vector<Event> out;
    CHECK_FALSE(s.poll(out, 1 << 20));  // nothing more to read now: the pipeline waits
    CHECK(said.size() == 1);            // said at the first pass
    CHECK_FALSE(s.poll(out, 1 << 20));
    CHECK_FALSE(s.poll(out, 1 << 20));
    CHECK(out.empty());
    REQUIRE(said.size() == 1);  // once, not every pass
    CHECK(said[0] == "open_failed: cannot read " + path + ": cannot open " + path + ": No such file or directory");
    REQUIRE(::symlink(env.fs.kmsg().c_str(), path.c_str()) == 0);
    while (s.poll(out, 1 << 20)) {
    }
    REQUIRE(out.size() == 1);
    CHECK(out[0].line == "waiting");
    REQUIRE(said.size() == 2);
    CHECK(said[1] == "opened: reading " + path + " again");
}

TEST_CASE("kmsg: each record carries its sequence number and device and bus id and whether the kernel wrote it",
          "[shipper][fixture]") {
    Env env;
    env.fs.ctl(
        "6;plain\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n"
        "4;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.\n"
        "14;written by a root process\n");
    const auto e = env.run();
    REQUIRE(e.size() == 3);
    const auto md = [](const Event& ev) {
        std::string s;
        for (auto& [k, v] : ev.metadata) s += k + "=" + v + " ";
        return s;
    };
    CHECK(md(e[0]) == "seq=0 subsystem=pci device=+pci:0000:3b:00.0 ");
    CHECK(md(e[1]) == "seq=1 xid=79 pci_bdf=0000:3b:00 event=xid severity=fatal ");
    CHECK(e[1].pci_bdf == "0000:3b:00");  // as the driver prints it
    CHECK(md(e[2]) == "seq=2 ");
    CHECK(e[0].kernel_facility);
    CHECK(e[1].kernel_facility);
    CHECK_FALSE(e[2].kernel_facility);  // facility 1 (user): never tagged as the kernel's
}

TEST_CASE("kmsg: a pass stops once its byte budget is spent to the byte and the next pass goes on",
          "[shipper][fixture]") {
    Env env;
    // Each record costs its text and 64 bytes: 36 + 64 = 100.
    env.fs.ctl("6;" + std::string(36, 'a') + "\n6;" + std::string(36, 'b') + "\n6;" + std::string(36, 'c') + "\n");
    KmsgSource s(env.fs.kmsg(), env.clock, {"c", "n"}, env.m);
    std::vector<Event> out;
    CHECK(s.poll(out, 100));  // the budget spent on the first: more to read
    CHECK(out.size() == 1);
    CHECK(s.poll(out, 101));  // one byte past the first record: a second and a third
    CHECK(out.size() == 3);
    CHECK_FALSE(s.poll(out, 1000));
    CHECK(out.size() == 3);
}
