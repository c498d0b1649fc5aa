#include "shipper/stages/stages.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <map>
#include <random>

#include "captured.hpp"
#include "node/job_state.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::shipper;

namespace {
using jobtrail::node::StreamKind;

// An event as the sources make it: the kind of stream comes from the source, not the label.
Event ev(std::string job, std::string line, std::string job_id = "", int64_t ts = 2000, std::string step = "") {
    Event e;
    e.ts_ns = ts;
    jobtrail::loki::LabelSet labels = {{"job", job}};
    if (!job_id.empty()) labels["job_id"] = job_id;
    const StreamKind kind = job.find("nccl") != std::string::npos   ? StreamKind::kNccl
                            : job.find("kmsg") != std::string::npos ? StreamKind::kKernel
                                                                    : StreamKind::kOther;
    // A job id from an NCCL file's path is the Slurm job's (the contract labeler's).
    e.origin = make_origin(std::move(labels), {}, kind, job_id, step, {}, kind == StreamKind::kNccl && !job_id.empty());
    e.line = std::move(line);
    return e;
}

jobtrail::node::Layout layout(const std::string& run_dir) {
    jobtrail::node::Layout l;
    l.run_dir = run_dir;
    return l;
}

// Stages with the default configuration over the node layout `l`, whose job table takes the
// time from `now` (the test moves it).
Stages on_clock(const jobtrail::node::Layout& l, Metrics& m, const int64_t& now) {
    return Stages(jobtrail::config::default_shipper_config(), l, m, {}, [&now] { return now; });
}
}  // namespace

TEST_CASE("stages: blank lines, drop rules, NCCL noise, running jobs on kernel records", "[shipper]") {
    jobtrail::test::TempDir run;
    ::mkdir((run.path() + "/jobs").c_str(), 0755);
    std::ofstream(run.path() + "/jobs/10") << R"({"job_id":"10","start_ns":1000,"trace":""})";
    std::ofstream(run.path() + "/jobs/11") << R"({"job_id":"11","start_ns":1500,"trace":"INFO"})";
    std::ofstream(run.path() + "/jobs/12") << R"({"job_id":"12","start_ns":5000,"trace":""})";
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.drop = {{"healthcheck", "GET /health"}};
    Metrics m;
    Stages st(cfg, layout(run.path()), m);
    std::vector<Event> e = {ev("app", "   "),
                            ev("app", "GET /health 200"),
                            ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", "10"),
                            ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", "11"),
                            ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", "99"),
                            ev("nccl", "gpu:1:1 [0] NCCL WARN NET/IB : error", "10"),
                            ev("kmsg", "NVRM: Xid ...")};
    st.apply(e);
    CHECK(e[0].dropped);
    CHECK(e[1].dropped);
    CHECK(e[2].dropped);        // job 10 did not ask for trace
    CHECK_FALSE(e[3].dropped);  // job 11 did
    CHECK_FALSE(e[4].dropped);  // unknown job: kept
    CHECK_FALSE(e[5].dropped);  // warnings always
    // Two jobs ran at the record's time and it names no device: it concerns both.
    using P = std::pair<std::string, std::string>;
    CHECK(e[6].metadata == std::vector<P>{{"slurm_jobs_running", "10,11"}, {"attribution", "node"}});
    CHECK(m.group<Drops>().of("healthcheck") == 1);
    CHECK(m.group<Drops>().of("nccl_noise") == 1);
}

TEST_CASE("stages: a drop pattern whose DFA a job's long line exhausts still matches, and says nothing on stderr",
          "[shipper][hostile]") {
    // RE2 falls back from its DFA to a slower engine when the DFA runs out of memory, and would
    // say so on stderr at every line: a job printing such lines would flood the shipper's journal.
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.drop = {{"long", "[a-q][^u-z]{200}x"}};
    Metrics m;
    Stages st(cfg, layout(run.path()), m);
    std::mt19937 rng(29);
    std::string no_x(250'000, ' ');
    for (char& c : no_x) c = static_cast<char>('a' + rng() % 23);  // a-w: never the final x
    std::vector<Event> e = {ev("app", no_x), ev("app", no_x + std::string(201, 'b') + "x"), ev("app", no_x)};
    CHECK(jobtrail::test::captured(2, [&] { st.apply(e); }) == "");
    CHECK_FALSE(e[0].dropped);
    CHECK(e[1].dropped);
    CHECK_FALSE(e[2].dropped);
    CHECK(m.group<Drops>().of("long") == 1);
}

TEST_CASE("stages key on the kind of stream: a renamed `job` and a step's own trace request", "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"20", "u", "1000", "n", "", 1000, {}, {}, 0}).ok);
    // The job did not ask for trace capture; its step 1 did (srun --trace-capture inside it).
    REQUIRE(jobtrail::node::write_step_record(l, {"20", "1", "INFO", 1100, ""}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"20", "2", "none", 1100, ""}).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    Metrics m;
    Stages st(cfg, l, m);
    const std::string info = "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1";
    std::vector<Event> e = {ev("gpu-nccl", info, "20", 2000, "0"), ev("gpu-nccl", info, "20", 2000, "1"),
                            ev("gpu-nccl", info, "20", 2000, "2"), ev("gpu-kmsg", "NVRM: Xid ...")};
    st.apply(e);
    CHECK(e[0].dropped);        // step 0: the job's request (none)
    CHECK_FALSE(e[1].dropped);  // step 1 asked
    CHECK(e[2].dropped);
    // The only job running: the record is its.
    REQUIRE_FALSE(e[3].metadata.empty());
    CHECK(e[3].metadata[0] == std::make_pair(std::string("slurm_job_id"), std::string("20")));
}

TEST_CASE("stages: a job submitted with --trace-capture keeps the NCCL INFO of a step whose own record says none",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    // sbatch --trace-capture=INFO; an srun inside it without the option writes trace "none".
    REQUIRE(jobtrail::node::write_job_marker(l, {"21", "u", "1000", "n", "INFO", 1000, {}, {}, 0}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"21", "0", "none", 1100, ""}).ok);
    // Beside it, a job without trace capture: its untraced step's INFO goes, its traced step's stays.
    REQUIRE(jobtrail::node::write_job_marker(l, {"22", "u", "1000", "n", "none", 1000, {}, {}, 0}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"22", "0", "none", 1100, ""}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"22", "1", "TRACE", 1100, ""}).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    Metrics m;
    Stages st(cfg, l, m);
    const std::string info = "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1";
    std::vector<Event> e = {ev("nccl", info, "21", 2000, "0"), ev("nccl", info, "21", 2000, "batch"),
                            ev("nccl", info, "22", 2000, "0"), ev("nccl", info, "22", 2000, "1")};
    st.apply(e);
    CHECK_FALSE(e[0].dropped);  // the job asked: every step of it is traced
    CHECK_FALSE(e[1].dropped);  // a step without a record: the job's request
    CHECK(e[2].dropped);        // neither asked
    CHECK_FALSE(e[3].dropped);  // the step asked
    CHECK(m.group<Drops>().of("nccl_noise") == 1);
}

TEST_CASE("stages: NCCL noise is a line NCCL said at INFO, not one that merely quotes such a line", "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"23", "u", "1000", "n", "none", 1000, {}, {}, 0}).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    Metrics m;
    Stages st(cfg, l, m);
    std::vector<Event> e = {
        ev("nccl", "gpu01:4242:4250 [0] NCCL INFO Channel 00/02 : 0 1", "23"),
        ev("nccl", "2026-12-03T12:00:00.000001+00:00 gpu01:4242:4250 [0] NCCL INFO Comm 0x1 rank 0 nranks 2", "23"),
        ev("nccl", "gpu01:4242:4250 [0] NCCL WARN unexpected message 'NCCL INFO Channel 00' from peer 3", "23"),
        ev("nccl", "gpu01:4242:4250 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0", "23")};
    st.apply(e);
    CHECK(e[0].dropped);
    CHECK(e[1].dropped);        // NCCL's own timestamp prefix (the plugin asks for one)
    CHECK_FALSE(e[2].dropped);  // a warning, whatever text it carries
    CHECK_FALSE(e[3].dropped);  // INFO, but not Net/Channel/Comm chatter
}

TEST_CASE("stages: a job's NCCL lines past its budget are dropped, counted and said once per window in its stream",
          "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1310;  // ten lines of 99 bytes, each with 32 of framing
    cfg.nccl_budget_window_ms = 60'000;
    Metrics m;
    int64_t now = 1'000'000'000;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    const std::string line(99, 'x');
    std::vector<Event> e;
    for (int i = 0; i < 30; ++i) e.push_back(ev("nccl", line, "4242", 3000 + i));
    for (int i = 0; i < 5; ++i) e.push_back(ev("nccl", line, "4343", 3000 + i));  // another job: its own budget
    e.push_back(ev("kmsg", "mlx5_core 0000:3b:00.0: port down"));
    st.apply(e);
    size_t kept_4242 = 0, kept_4343 = 0;
    for (const auto& x : e) {
        if (x.dropped) continue;
        if (x.origin->job_id == "4242") ++kept_4242;
        if (x.origin->job_id == "4343") ++kept_4343;
    }
    CHECK(kept_4242 == 10);
    CHECK(kept_4343 == 5);
    CHECK_FALSE(e.back().dropped);  // the kernel is never held to a job's budget
    CHECK(m.group<Drops>().of("nccl_budget") == 20);

    // Nothing is said before the window is over.
    std::vector<Event> said;
    st.flush(said);
    CHECK(said.empty());

    now += 61'000'000'000;
    st.flush(said);
    REQUIRE(said.size() == 1);
    CHECK(said[0].line ==
          "jobtrail dropped 20 NCCL lines (1980 bytes) of job 4242 over its budget of 1310 bytes per 1m on this node "
          "(shipper.stages.nccl_budget)");
    CHECK(said[0].origin->label("job") == "nccl");
    CHECK(said[0].origin->label("job_id") == "4242");
    CHECK(said[0].origin->kind == StreamKind::kNccl);

    // A new window: the job has its budget again, and a window without drops says nothing.
    std::vector<Event> next = {ev("nccl", line, "4242")};
    st.apply(next);
    CHECK_FALSE(next[0].dropped);
    now += 61'000'000'000;
    said.clear();
    st.flush(said);
    CHECK(said.empty());
}

TEST_CASE("stages: the NCCL budget's window is the shipper's clock, not the lines' own timestamps", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 164;  // two lines of 50 bytes and their framing
    Metrics m;
    const int64_t now = 5'000'000'000;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    // A user stamping each line an hour apart does not get a fresh budget per line.
    std::vector<Event> e;
    for (int i = 0; i < 10; ++i) e.push_back(ev("nccl", std::string(50, 'y'), "7", int64_t(i) * 3'600'000'000'000));
    st.apply(e);
    size_t kept = 0;
    for (const auto& x : e) kept += !x.dropped;
    CHECK(kept == 2);
}

TEST_CASE("stages: no NCCL budget when its bytes are 0", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 0;
    Metrics m;
    Stages st(cfg, layout(run.path()), m);
    std::vector<Event> e;
    for (int i = 0; i < 1000; ++i) e.push_back(ev("nccl", std::string(1000, 'z'), "8"));
    st.apply(e);
    for (const auto& x : e) CHECK_FALSE(x.dropped);
}

TEST_CASE("stages: a kernel record read just after its job's epilog removed the marker still names that job",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"30", "u", "1000", "n", "", 1000, {}, {}, 0}).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, {"31", "u", "1000", "n", "", 1000, {}, {}, 0}).ok);
    int64_t now = 5000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);  // both markers seen
    // Job 30 ends at 6000: its epilog removes the marker; the shipper notices at 6000.
    REQUIRE(::unlink((run.path() + "/jobs/30").c_str()) == 0);
    now = 6000;
    st.apply(none);
    // An Xid the kernel logged at 5990, read after that: still job 30's (and 31's, running).
    // One logged after the shipper saw the marker gone is not job 30's.
    now = 7000;
    std::vector<Event> e = {ev("kmsg", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "", 5990),
                            ev("kmsg", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "", 6500),
                            ev("kmsg", "NVRM: Xid (PCI:0000:3b:00): 79, pid=1", "", 900)};
    st.apply(e);
    using P = std::pair<std::string, std::string>;
    CHECK(e[0].metadata == std::vector<P>{{"slurm_jobs_running", "30,31"}, {"attribution", "node"}});
    CHECK(e[1].metadata ==
          std::vector<P>{{"slurm_job_id", "31"}, {"slurm_jobs_running", "31"}, {"attribution", "node"}});
    CHECK(e[2].metadata.empty());  // before either job started
}

TEST_CASE("stages: one-byte NCCL lines with long metadata pay for the metadata, a stopping shipper says its drops",
          "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 10'000;
    Metrics m;
    int64_t now = 1'000'000'000;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    const auto origin = make_origin({{"job", "nccl"}, {"job_id", "9"}},
                                    {{"file", "0." + std::string(230, 'h') + ".1.log"}}, StreamKind::kNccl, "9");
    std::vector<Event> e;
    for (int i = 0; i < 1000; ++i) e.push_back({1, origin, "7", {}, false});
    st.apply(e);
    size_t kept = 0;
    for (const auto& x : e) kept += !x.dropped;
    CHECK(kept == 10'000 / (32 + 1 + 4 + 238));  // line, framing, and the file name it carries
    // The window is still open: nothing said, unless the shipper is stopping.
    std::vector<Event> said;
    st.flush(said);
    CHECK(said.empty());
    st.flush(said, /*all=*/true);
    REQUIRE(said.size() == 1);
    CHECK(said[0].line.rfind("jobtrail dropped " + std::to_string(1000 - kept) + " NCCL lines (", 0) == 0);
}

TEST_CASE("stages: an NCCL file whose name gives no job does not spend another job's budget", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1000;
    Metrics m;
    Stages st(cfg, layout(run.path()), m, [] { return int64_t{1'000'000'000}; });
    std::vector<Event> e;
    for (int i = 0; i < 100; ++i) e.push_back(ev("nccl", std::string(100, 'q')));  // no job id
    e.push_back(ev("nccl", "NCCL WARN real trouble", "4243"));
    st.apply(e);
    CHECK_FALSE(e.back().dropped);
}

TEST_CASE("stages: a pod's NCCL lines never spend a Slurm job's NCCL budget, whatever job id it carries", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1000;
    Metrics m;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"4242", "u", "1000", "n", "", 1000, {}, {}, 0}).ok);
    Stages st(cfg, l, m, [] { return int64_t{1'000'000'000}; });
    // A pod given job 4242's id (a namespace the site trusts, a name like the job's) floods.
    auto pod = make_origin({{"job", "kubernetes-pods"},
                            {"namespace", "slurm"},
                            {"pod", "slurm-job-4242-w-0"},
                            {"container", "trainer"},
                            {"job_id", "4242"}},
                           {}, StreamKind::kNccl, "4242");
    std::vector<Event> e;
    for (int i = 0; i < 100; ++i) {
        Event x;
        x.ts_ns = 3000 + i;
        x.origin = pod;
        x.line = std::string(100, 'p');
        e.push_back(std::move(x));
    }
    e.push_back(ev("nccl", "gpu:1:1 [0] NCCL WARN NET/IB : error", "4242"));  // job 4242's own file
    st.apply(e);
    CHECK_FALSE(e.back().dropped);
    CHECK(m.group<Drops>().of("nccl_budget") > 0);  // the pod's excess: its own budget's
    std::vector<Event> said;
    st.flush(said, true);
    REQUIRE(said.size() == 1);
    CHECK(said[0].origin->label("job") == "kubernetes-pods");
}

TEST_CASE("stages: the NCCL budget is a user's share: five jobs of one user get one budget, another user's job its own",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    for (const char* id : {"501", "502", "503", "504", "505"})
        REQUIRE(jobtrail::node::write_job_marker(l, {id, "alice", "1000", "n", "", 1000, {}, {}, 0}).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, {"601", "bob", "1001", "n", "", 1000, {}, {}, 0}).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1310;  // ten lines of 99 bytes, each with 32 of framing
    cfg.nccl_budget_window_ms = 60'000;
    Metrics m;
    int64_t now = 1'000'000'000;
    Stages st(cfg, l, m, [&] { return now; });
    const std::string line(99, 'x');
    // Each job writes three budgets' worth, alice's jobs taking turns.
    std::vector<Event> e;
    for (int i = 0; i < 30; ++i)
        for (const char* id : {"501", "502", "503", "504", "505"}) e.push_back(ev("nccl", line, id, 3000 + i));
    for (int i = 0; i < 30; ++i) e.push_back(ev("nccl", line, "601", 3000 + i));
    st.apply(e);
    std::map<std::string, size_t> kept;
    for (const auto& x : e)
        if (!x.dropped) ++kept[x.origin->job_id];
    CHECK(kept["501"] + kept["502"] + kept["503"] + kept["504"] + kept["505"] == 10);  // alice: one user's budget
    CHECK(kept["501"] == 2);   // taking turns, each of her jobs got two lines through
    CHECK(kept["601"] == 10);  // bob's job: its full budget, whatever alice does
    CHECK(m.group<Drops>().of("nccl_budget") == 140 + 20);

    // Once the window is over, each job's stream says how many of its own lines went.
    now += 61'000'000'000;
    std::vector<Event> said;
    st.flush(said);
    std::map<std::string, std::string> by_job;
    for (const auto& x : said) by_job[std::string(x.origin->label("job_id"))] = x.line;
    REQUIRE(by_job.size() == 6);
    for (const char* id : {"501", "502", "503", "504", "505"})
        CHECK(by_job[id] == "jobtrail dropped 28 NCCL lines (2772 bytes) of job " + std::string(id) +
                                " over its user's budget of 1310 bytes per 1m on this node, shared by the user's jobs "
                                "(shipper.stages.nccl_budget)");
    CHECK(by_job["601"] ==
          "jobtrail dropped 20 NCCL lines (1980 bytes) of job 601 over its user's budget of 1310 bytes per 1m on this "
          "node, shared by the user's jobs (shipper.stages.nccl_budget)");
}

namespace {
// A kernel record as the kmsg source makes it: the extractor's pci_bdf, and the kernel's facility.
Event kernel(std::string line, int64_t ts, std::string bdf = "", bool kernel_facility = true) {
    Event e = ev("kmsg", std::move(line), "", ts);
    if (!bdf.empty()) e.metadata.emplace_back(jobtrail::node::metadata::kPciBdf, bdf);
    e.pci_bdf = std::move(bdf);
    e.kernel_facility = kernel_facility;
    return e;
}
std::string meta(const Event& e, const std::string& key) {
    for (const auto& [k, v] : e.metadata)
        if (k == key) return v;
    return "-";
}
jobtrail::node::JobMarker marker(std::string id, int64_t start, int minor, std::string bdf) {
    jobtrail::node::JobMarker m{id, "u", "1000", "n", "", start, {}, {}, 0};
    m.devices.push_back({"gpu", minor, std::move(bdf), "", ""});
    return m;
}
}  // namespace

TEST_CASE("stages: a kernel record goes to the job that owned its GPU then, even after the job's end", "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, marker("1", 1000, 0, "0000:1b:00.0")).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, marker("2", 1000, 1, "0000:3b:00.0")).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, marker("3", 1000, 2, "0000:5d:00.0")).ok);
    int64_t now = 10'000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> e = {
        kernel("NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus.", 5000, "0000:3b:00"),
        kernel("mlx5_core 0000:5e:00.0: health compromised - reached miss count", 5000, "0000:5e:00.0"),
        kernel("oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,"
               "oom_memcg=/slurm/uid_1000/job_3,task_memcg=/slurm/uid_1000/job_3/step_0/task_0,"
               "task=eat,pid=4040,uid=1000",
               5000),
        kernel("Memory cgroup out of memory: Killed process 4040 (eat) total-vm:10kB", 5000)};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "2");
    CHECK(meta(e[0], "attribution") == "device");
    CHECK(meta(e[0], "gpu") == "1");
    CHECK(meta(e[0], "slurm_jobs_running") == "1,2,3");
    CHECK(meta(e[1], "slurm_job_id") == "-");  // the HCA is no job's: every job's record
    CHECK(meta(e[1], "attribution") == "node");
    CHECK(meta(e[2], "slurm_job_id") == "3");
    CHECK(meta(e[2], "attribution") == "memcg");
    CHECK(meta(e[3], "slurm_job_id") == "3");

    // Job 2's epilog removes its marker at 20,000; the shipper reads an Xid stamped 5 ms before.
    jobtrail::node::remove_job_state(l, "2");
    now = 20'000;
    std::vector<Event> late = {
        kernel("NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception", 19'995, "0000:3b:00"),
        kernel("NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception", 20'500, "0000:3b:00")};
    st.apply(late);
    CHECK(meta(late[0], "slurm_job_id") == "2");
    CHECK(meta(late[0], "attribution") == "device");
    // After its end, the GPU is nobody's: the record is the node's (jobs 1 and 3 still run).
    CHECK(meta(late[1], "slurm_job_id") == "-");
    CHECK(meta(late[1], "attribution") == "node");
    CHECK(meta(late[1], "slurm_jobs_running") == "1,3");

    // Text a root process wrote (not facility 0) is never taken for a device or cgroup's word.
    std::vector<Event> forged = {kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, forged", 20'500, "", false),
                                 kernel("oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/slurm/uid_0/job_1,"
                                        "task_memcg=/slurm/uid_0/job_1/step_0,task=x,pid=9,uid=0",
                                        20'500, "", false)};
    st.apply(forged);
    CHECK(meta(forged[0], "attribution") == "node");
    CHECK(meta(forged[1], "attribution") == "node");
}

TEST_CASE("stages: the 256 jobs that ended last each take their GPU's late kernel records, an older one is the node's",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    // 256 jobs one after the other on one GPU, 100 ns each, ended while the shipper was down.
    for (int i = 0; i < 256; ++i) {
        const std::string id = std::to_string(100 + i);
        REQUIRE(jobtrail::node::write_job_marker(l, marker(id, 1000 + i * 100, 0, "0000:1b:00.0")).ok);
        jobtrail::node::remove_job_state(l, id, 1000 + i * 100 + 90);
    }
    // Then job 400 runs there while the shipper does, and ends: the 257th.
    REQUIRE(jobtrail::node::write_job_marker(l, marker("400", 30'000, 0, "0000:1b:00.0")).ok);
    int64_t now = 31'000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);
    jobtrail::node::remove_job_state(l, "400", 32'000);
    now = 33'000;
    const auto xid_at = [](int64_t ts) { return kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, x", ts, "0000:1b:00"); };
    std::vector<Event> e = {xid_at(1050), xid_at(1150), xid_at(31'500)};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "-");    // job 100, the 257th back: no longer judged against
    CHECK(meta(e[1], "slurm_job_id") == "101");  // the 256th back
    CHECK(meta(e[1], "attribution") == "device");
    CHECK(meta(e[2], "slurm_job_id") == "400");
}

TEST_CASE("stages: the epilog's end time decides, even for a job the shipper never saw end", "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    int64_t now = 1000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);
    // Job 40 starts and ends between two passes (or while the shipper is down).
    REQUIRE(jobtrail::node::write_job_marker(l, marker("40", 1100, 0, "0000:1b:00.0")).ok);
    jobtrail::node::remove_job_state(l, "40", 5000);
    now = 20'000;
    std::vector<Event> e = {kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, x", 4990, "0000:1b:00"),
                            kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, x", 5010, "0000:1b:00")};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "40");
    CHECK(meta(e[0], "attribution") == "device");
    // After its end (by the epilog's clock, not when the shipper noticed), nobody's.
    CHECK(meta(e[1], "slurm_job_id") == "-");
}

TEST_CASE("job table: step records of jobs with similar ids stay each job's, and new or rewritten ones are read",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    for (const char* id : {"12", "123"})
        REQUIRE(jobtrail::node::write_job_marker(l, {id, "u", "1000", "n", "", 1000, {}, {}, 0}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"12", "0", "none", 1100, ""}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"123", "0", "INFO", 1100, ""}).ok);
    JobTable t(l);
    t.refresh();
    CHECK(t.traced("12", "0") == 0);
    CHECK(t.traced("123", "0") == 1);
    // A step that starts later, and a record the plugin writes again (a new file in its place).
    REQUIRE(jobtrail::node::write_step_record(l, {"12", "1", "INFO", 1200, ""}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"123", "0", "none", 1100, ""}).ok);
    t.refresh();
    CHECK(t.traced("12", "1") == 1);
    CHECK(t.traced("123", "0") == 0);
    CHECK(t.traced("123", "1") == 0);  // no record: the job's own request
    // A record that comes before its job's marker counts once the marker is there.
    REQUIRE(jobtrail::node::write_step_record(l, {"1200", "0", "INFO", 1300, ""}).ok);
    t.refresh();
    CHECK(t.traced("1200", "0") == -1);
    REQUIRE(jobtrail::node::write_job_marker(l, {"1200", "u", "1000", "n", "", 1300, {}, {}, 0}).ok);
    t.refresh();
    CHECK(t.traced("1200", "0") == 1);
    // Job 12 ends: job 123's and 1200's steps are still theirs.
    jobtrail::node::remove_job_state(l, "12", 5000);
    t.refresh();
    CHECK(t.traced("123", "0") == 0);
    CHECK(t.traced("1200", "0") == 1);
    CHECK(t.traced("12", "1") == 1);  // remembered after its record is gone
}

namespace {
// A DCGM event as the dcgm source makes it: DCGM's GPU id and bus id as metadata, the bus id for
// attribution (DCGM's 8-digit domain and upper case, where the kernel prints 0000:3b:00).
Event dcgm(std::string line, int64_t ts, std::string gpu, std::string bdf) {
    Event e;
    e.ts_ns = ts;
    e.origin = make_origin({{"job", "dcgm"}}, {}, StreamKind::kDcgm);
    e.line = std::move(line);
    e.metadata = {{"gpu", gpu}, {"pci_bdf", bdf}, {"event", "xid"}};
    e.pci_bdf = std::move(bdf);
    return e;
}
size_t count_key(const Event& e, const std::string& key) {
    size_t n = 0;
    for (const auto& kv : e.metadata) n += kv.first == key;
    return n;
}
}  // namespace

TEST_CASE("stages: a DCGM event goes to the job that owned its GPU at the event's time, else node-wide",
          "[shipper][dcgm]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, marker("7", 1000, 0, "0000:1b:00.0")).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, marker("8", 1000, 3, "0000:3b:00.0")).ok);
    int64_t now = 10'000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> e = {dcgm("XID 79 on GPU 3", 5000, "3", "00000000:3B:00.0"),
                            dcgm("Thermal violation on GPU 5: 95 C", 5000, "5", "00000000:DB:00.0")};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "8");
    CHECK(meta(e[0], "attribution") == "device");
    CHECK(meta(e[0], "slurm_jobs_running") == "7,8");
    // DCGM's GPU id stays the only `gpu`: the job's device minor is not added beside it.
    CHECK(count_key(e[0], "gpu") == 1);
    CHECK(meta(e[0], "gpu") == "3");
    // A GPU no job owns: every running job's, like a kernel record naming no job's device.
    CHECK(meta(e[1], "slurm_job_id") == "-");
    CHECK(meta(e[1], "attribution") == "node");
    CHECK(meta(e[1], "slurm_jobs_running") == "7,8");

    // Job 8 ends at 20,000: an event on its GPU stamped after that is not its.
    jobtrail::node::remove_job_state(l, "8", 20'000);
    now = 30'000;
    std::vector<Event> late = {dcgm("XID 79 on GPU 3", 19'000, "3", "00000000:3B:00.0"),
                               dcgm("XID 79 on GPU 3", 25'000, "3", "00000000:3B:00.0")};
    st.apply(late);
    CHECK(meta(late[0], "slurm_job_id") == "8");
    CHECK(meta(late[0], "attribution") == "device");
    CHECK(meta(late[1], "slurm_job_id") == "7");  // the only job running then, as for a kernel record
    CHECK(meta(late[1], "attribution") == "node");
    CHECK(meta(late[1], "slurm_jobs_running") == "7");
}

TEST_CASE("stages: DCGM's text is never read as an OOM kill", "[shipper][dcgm]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, marker("1", 1000, 0, "0000:1b:00.0")).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, marker("2", 1000, 1, "0000:3b:00.0")).ok);
    auto cfg = jobtrail::config::default_shipper_config();
    Metrics m;
    Stages st(cfg, l, m, {}, [] { return int64_t{10'000}; });
    // A health message is DCGM's text, which may quote anything: no memcg attribution from it.
    std::vector<Event> e = {
        dcgm("DCGM_FR_UNKNOWN on GPU 9 (sm, fail): oom-kill:constraint=CONSTRAINT_MEMCG,"
             "oom_memcg=/slurm/uid_1000/job_1,task_memcg=/slurm/uid_1000/job_1/step_0,"
             "task=x,pid=9,uid=1000",
             5000, "9", "")};
    st.apply(e);
    CHECK(meta(e[0], "attribution") == "node");
    CHECK(meta(e[0], "slurm_job_id") == "-");
}

TEST_CASE("stages: an ended job takes its GPU's late kernel records for an hour after its end and no longer",
          "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    constexpr int64_t kHour = 3600LL * 1'000'000'000;
    REQUIRE(jobtrail::node::write_job_marker(l, marker("50", 1000, 0, "0000:1b:00.0")).ok);
    int64_t now = 2000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);
    jobtrail::node::remove_job_state(l, "50", 5000);
    const auto xid = [] { return kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, x", 4000, "0000:1b:00"); };
    // Read back late (a restart, a slow pass): the hour after its end is still the job's.
    now = 5000 + kHour - 1;
    std::vector<Event> e = {xid()};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "50");
    CHECK(meta(e[0], "attribution") == "device");
    now = 5000 + kHour + 1;
    e = {xid()};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "-");  // and no job runs: nothing to say
    CHECK(meta(e[0], "attribution") == "-");
}

TEST_CASE(
    "stages: a job that ended between two passes is read from the ended directory whichever part of its "
    "time changed",
    "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, marker("30", 100, 0, "0000:1b:00.0")).ok);
    jobtrail::node::remove_job_state(l, "30", 200);
    // A filesystem with whole-second times, or a directory touched within one second.
    const auto set_mtime = [&](time_t sec, long nsec) {
        const timespec t[2] = {{sec, nsec}, {sec, nsec}};
        REQUIRE(::utimensat(AT_FDCWD, l.ended_dir().c_str(), t, 0) == 0);
    };
    set_mtime(1000, 0);
    int64_t now = 1000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);
    const auto xid = [](int64_t ts) { return kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, x", ts, "0000:1b:00"); };
    // Jobs 40 and 41 start and end between passes: the shipper never sees them run.
    REQUIRE(jobtrail::node::write_job_marker(l, marker("40", 1100, 0, "0000:1b:00.0")).ok);
    jobtrail::node::remove_job_state(l, "40", 1200);
    set_mtime(1001, 0);  // the seconds changed only
    now = 2000;
    std::vector<Event> e = {xid(1150)};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "40");
    REQUIRE(jobtrail::node::write_job_marker(l, marker("41", 1300, 0, "0000:1b:00.0")).ok);
    jobtrail::node::remove_job_state(l, "41", 1400);
    set_mtime(1001, 500);  // the nanoseconds changed only
    now = 3000;
    e = {xid(1350)};
    st.apply(e);
    CHECK(meta(e[0], "slurm_job_id") == "41");
}

TEST_CASE(
    "stages: of 257 ended jobs the one that ended first is forgotten whatever its id and a running job keeps "
    "its own",
    "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    // Job 500 runs on GPU 1 throughout; job 9 ran on GPU 0 and ended first.
    REQUIRE(jobtrail::node::write_job_marker(l, marker("500", 500, 1, "0000:3b:00.0")).ok);
    REQUIRE(jobtrail::node::write_job_marker(l, marker("9", 600, 0, "0000:1b:00.0")).ok);
    jobtrail::node::remove_job_state(l, "9", 690);
    int64_t now = 700;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);
    // Then 256 jobs one after the other on GPU 0, with ids that sort before job 9's.
    for (int i = 0; i < 256; ++i) {
        const std::string id = std::to_string(100 + i);
        REQUIRE(jobtrail::node::write_job_marker(l, marker(id, 1000 + i * 100, 0, "0000:1b:00.0")).ok);
        jobtrail::node::remove_job_state(l, id, 1000 + i * 100 + 90);
    }
    now = 31'000;
    const auto xid_at = [](int64_t ts, const std::string& bus) {
        return kernel("NVRM: Xid (PCI:" + bus + "): 79, pid=1, x", ts, bus);
    };
    std::vector<Event> e = {xid_at(650, "0000:1b:00"), xid_at(1050, "0000:1b:00"), xid_at(26'550, "0000:1b:00"),
                            xid_at(650, "0000:3b:00")};
    st.apply(e);
    // Job 9, the 257th back: the node's, so the one job running's.
    CHECK(meta(e[0], "attribution") == "node");
    CHECK(meta(e[0], "slurm_job_id") == "500");
    CHECK(meta(e[1], "attribution") == "device");
    CHECK(meta(e[1], "slurm_job_id") == "100");  // the 256th back
    CHECK(meta(e[2], "slurm_job_id") == "355");
    CHECK(meta(e[3], "slurm_job_id") == "500");
    CHECK(meta(e[3], "attribution") == "device");
}

TEST_CASE(
    "stages: past 10000 jobs known the shipper forgets ended jobs in id order down to 5000 and keeps every "
    "running one",
    "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    ::mkdir((run.path() + "/jobs").c_str(), 0755);
    const auto start = [&](int id) {
        std::ofstream(run.path() + "/jobs/" + std::to_string(id))
            << R"({"job_id":")" << id << R"(","start_ns":1000,"trace":""})";
    };
    // 10000 jobs run, none asked for trace capture; job 998 has GPU 0.
    for (int id = 1; id <= 10'000; ++id)
        if (id != 998) start(id);
    REQUIRE(jobtrail::node::write_job_marker(l, marker("998", 1000, 0, "0000:1b:00.0")).ok);
    int64_t now = 2000;
    Metrics m;
    Stages st = on_clock(l, m, now);
    std::vector<Event> none;
    st.apply(none);
    // Jobs 1 to 5002 end: 10000 jobs are known, no more than the table keeps.
    for (int id = 1; id <= 5002; ++id) ::unlink(l.job_marker(std::to_string(id)).c_str());
    now = 3000;
    const auto noise = [](int id) {
        return ev("nccl", "gpu:1:1 [0] NCCL INFO Channel 00/02 : 0 1", std::to_string(id));
    };
    std::vector<Event> e = {noise(1)};
    st.apply(e);
    CHECK(e[0].dropped);  // still known not to trace
    // Job 10001 starts: past 10000, the ended jobs go in id order ("1", "10", "100", ... "998", "999") until 5000
    // jobs are left: all 4999 running ones and the last ended one.
    start(10'001);
    now = 4000;
    e = {noise(1),    noise(998),    noise(999),
         noise(5003), noise(10'001), kernel("NVRM: Xid (PCI:0000:1b:00): 79, pid=1, x", 1500, "0000:1b:00")};
    st.apply(e);
    CHECK_FALSE(e[0].dropped);  // forgotten: an unknown job's lines are kept
    CHECK_FALSE(e[1].dropped);
    CHECK(e[2].dropped);  // the 5000th
    CHECK(e[3].dropped);  // running
    CHECK(e[4].dropped);
    // Job 998 is forgotten for its kernel records too: its GPU's Xid is the node's.
    CHECK(meta(e[5], "slurm_job_id") == "-");
    CHECK(meta(e[5], "attribution") == "node");
}

TEST_CASE("job table: a new step record is read whichever part of the steps directory's time changed", "[shipper]") {
    jobtrail::test::TempDir run;
    const auto l = layout(run.path());
    REQUIRE(jobtrail::node::write_job_marker(l, {"12", "u", "1000", "n", "", 1000, {}, {}, 0}).ok);
    REQUIRE(jobtrail::node::write_step_record(l, {"12", "0", "none", 1100, ""}).ok);
    // A filesystem with whole-second times, or a directory touched within one second; long ago.
    const auto set_mtime = [&](time_t sec, long nsec) {
        const timespec t[2] = {{sec, nsec}, {sec, nsec}};
        REQUIRE(::utimensat(AT_FDCWD, l.steps_dir().c_str(), t, 0) == 0);
    };
    set_mtime(1000, 0);
    JobTable t(l);
    t.refresh();
    CHECK(t.traced("12", "0") == 0);
    REQUIRE(jobtrail::node::write_step_record(l, {"12", "1", "INFO", 1200, ""}).ok);
    set_mtime(1001, 0);  // the seconds changed only
    t.refresh();
    CHECK(t.traced("12", "1") == 1);
    REQUIRE(jobtrail::node::write_step_record(l, {"12", "2", "INFO", 1300, ""}).ok);
    set_mtime(1001, 500);  // the nanoseconds changed only
    t.refresh();
    CHECK(t.traced("12", "2") == 1);
}

TEST_CASE("stages: blank lines are dropped and counted under blank only when drop_blank is on", "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    REQUIRE(cfg.drop_blank);
    {
        Metrics m;
        Stages st(cfg, layout(run.path()), m);
        std::vector<Event> e = {ev("app", " \t\r"), ev("app", ""), ev("app", " x ")};
        st.apply(e);
        CHECK(e[0].dropped);
        CHECK(e[1].dropped);
        CHECK_FALSE(e[2].dropped);
        CHECK(m.group<Drops>().of("blank") == 2);
        CHECK(m.render().find("jobtrail_shipper_dropped_total{reason=\"blank\"} 2\n") != std::string::npos);
    }
    cfg.drop_blank = false;
    Metrics m;
    Stages st(cfg, layout(run.path()), m);
    std::vector<Event> e = {ev("app", " \t\r"), ev("app", "")};
    st.apply(e);
    CHECK_FALSE(e[0].dropped);
    CHECK_FALSE(e[1].dropped);
    CHECK(m.group<Drops>().of("blank") == 0);
}

TEST_CASE("stages: a job's NCCL budget window ends to the nanosecond and its limit and window are said in whole units",
          "[shipper]") {
    jobtrail::test::TempDir run;
    auto cfg = jobtrail::config::default_shipper_config();
    cfg.nccl_budget_bytes = 1 << 20;     // said as 1MiB, not 1024KiB
    cfg.nccl_budget_window_ms = 90'000;  // said as 90s, not 1m
    Metrics m;
    const int64_t start = 1'000'000'000;
    int64_t now = start;
    Stages st(cfg, layout(run.path()), m, [&] { return now; });
    const std::string line(200'000, 'x');
    std::vector<Event> e;
    for (int i = 0; i < 6; ++i) e.push_back(ev("nccl", line, "4242", 3000 + i));
    st.apply(e);
    size_t kept = 0;
    for (const auto& x : e) kept += !x.dropped;
    CHECK(kept == 5);  // five lines of 200000 bytes and their framing fit in 1 MiB, a sixth not
    // Ten seconds on (past the tenth of a window after which the budget is looked at again):
    // the same window, nothing said yet, and a small line still dropped.
    now += 10'000'000'000;
    std::vector<Event> said;
    st.flush(said);
    CHECK(said.empty());
    std::vector<Event> more = {ev("nccl", "small", "4242")};
    st.apply(more);
    CHECK(more[0].dropped);
    // A line a millisecond before the window's end: still this window, and the budget was
    // looked at then.
    now = start + 90'000'000'000 - 1'000'000;
    std::vector<Event> last = {ev("nccl", "small", "4242")};
    st.apply(last);
    CHECK(last[0].dropped);
    // 90 s after the window began, to the nanosecond: a new window, the job's line ships at once
    // (however recently the budgets were looked at).
    now = start + 90'000'000'000;
    std::vector<Event> next = {ev("nccl", "next window", "4242")};
    st.apply(next);
    CHECK_FALSE(next[0].dropped);
    st.flush(said);
    REQUIRE(said.size() == 1);
    CHECK(said[0].line ==
          "jobtrail dropped 3 NCCL lines (200010 bytes) of job 4242 over its budget of 1MiB per 90s on this node "
          "(shipper.stages.nccl_budget)");
}
