#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <ctime>
#include <fstream>
#include <iomanip>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "common/fs.hpp"
#include "config/config.hpp"
#include "node/job_state.hpp"
#include "node/layout.hpp"
#include "node/nccl_file.hpp"
#include "node/schema.hpp"
#include "shipper/sources/registry.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::node;

TEST_CASE("NCCL file names: what the plugin sets is what the shipper parses back", "[node]") {
    Layout l;
    l.nccl_dir = "/x/nccl";
    CHECK(nccl_debug_file(l, "4242", "batch") == "/x/nccl/4242/batch.%h.%p.log");
    // NCCL expands %h and %p; the result parses back into the same parts.
    for (const auto& [step, host, pid] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"batch", "gpu01", "1234"}, {"0", "gpu-a.rack3", "7"}, {"4294967294", "h", "99999"}}) {
        const std::string path = l.nccl_job_dir("4242") + "/" + nccl_file_name(step, host, pid);
        const auto f = parse_nccl_file(path);
        REQUIRE(f);
        CHECK(f->job_id == "4242");
        CHECK(f->step == step);
        CHECK(f->host == host);
        CHECK(f->pid == pid);
    }
    for (const char* bad : {"/x/nccl/4242/batch.gpu01.12a.log", "/x/nccl/4242/batch.1234.log", "/x/nccl/42x/0.h.1.log",
                            "/x/nccl/4242/.h.1.log", "/x/nccl/4242/0.h.1.txt", "/x/nccl/4242/0..1.log"})
        CHECK_FALSE(parse_nccl_file(bad));
}

TEST_CASE("an NCCL file name parses alone or under its job directory and its pid is all digits", "[node][hostile]") {
    // A bare name has no job; a path whose directory is only the job id names it.
    auto f = parse_nccl_file("batch.gpu01.0.log");
    REQUIRE(f);
    CHECK(f->job_id.empty());
    CHECK(f->step == "batch");
    CHECK(f->host == "gpu01");
    CHECK(f->pid == "0");
    f = parse_nccl_file("4242/0.h.9.log");
    REQUIRE(f);
    CHECK(f->job_id == "4242");
    CHECK(f->step == "0");
    CHECK(f->host == "h");
    CHECK(f->pid == "9");
    CHECK(parse_nccl_file("/4242/1.h.1234567890.log")->job_id == "4242");
    // A job's user names the files in their directory: anything else is none of ours.
    for (const char* bad : {"/x/nccl/4242/0.h..log", "/x/nccl/4242/0.h.-1.log", "/x/nccl/4242/0.h.1:.log",
                            "/x/nccl/4242/0.h./.log", "/x/nccl/4242/.log", "/x/nccl/4242/0.h.1.log.txt",
                            "/x/nccl/4242/0.h.1log", "/x/nccl/..4242/0.h.1.log", "4242x/0.h.1.log", "0.h.1.LOG"})
        CHECK_FALSE(parse_nccl_file(bad));
}

TEST_CASE("an NCCL name part is plain: ASCII letters and digits and - and _ up to 64 bytes", "[node][hostile]") {
    for (const std::string& good :
         std::vector<std::string>{"a", "z", "A", "Z", "0", "9", "-", "_", "gpu-01_a", std::string(64, 'x')})
        CHECK(plain_name_part(good));
    for (const std::string& bad : std::vector<std::string>{"", std::string(65, 'x'), "`", "{", "@", "[", "/", ":", ".",
                                                           " ", "gpu.01", "a\xc3\xa9", std::string("a\0b", 3), ".."})
        CHECK_FALSE(plain_name_part(bad));
}

TEST_CASE("an NCCL line names its host and pid only when its prefix says both plainly", "[node][hostile]") {
    auto o = nccl_line_origin("[2026-11-29T23:52:22.867605+0200] gpu-01_a:0:1240 [0] NCCL INFO x");
    REQUIRE(o);
    CHECK(o->host == "gpu-01_a");
    CHECK(o->pid == "0");
    o = nccl_line_origin("h:9:");
    REQUIRE(o);
    CHECK(o->host == "h");
    CHECK(o->pid == "9");
    // A user's own line in the file: a time, a colon too few, a host that could name another
    // file, a pid that is not one, a bracket never closed.
    for (const char* bad :
         {"gpu01 1234 1240 NCCL INFO x", "gpu01:1234 NCCL INFO x", "../x:1234:1 y", "gpu.01:1234:1240 x", ":1234:1 x",
          "gpu01::1 x", "gpu01:12a:1 x", "gpu01:-1:1 x", "[2026-11-29T23:52:22.867605+0200 gpu01:1234:1240 x"})
        CHECK_FALSE(nccl_line_origin(bad));
}

TEST_CASE("NCCL line stamps: what the plugin asks NCCL for is what the shipper splits and reads back", "[node]") {
    // NCCL expands %6f to the microseconds itself and the rest as strftime does.
    std::string format = kNcclStampFormat;
    format.replace(format.find("%6f"), 3, "867605");
    std::tm tm{};
    tm.tm_year = 2026 - 1900;
    tm.tm_mon = 10;
    tm.tm_mday = 29;
    tm.tm_hour = 23;
    tm.tm_min = 52;
    tm.tm_sec = 22;
    tm.tm_gmtoff = 2 * 3600;
    std::ostringstream made;
    made << std::put_time(&tm, format.c_str()) << "gpu01:1234:1240 [0] NCCL INFO Bootstrap";
    const std::string line = made.str();
    CHECK(line == "[2026-11-29T23:52:22.867605+0200] gpu01:1234:1240 [0] NCCL INFO Bootstrap");
    jobtrail::Rfc3339Parser stamps;
    CHECK(NcclLine(line).time(stamps) == 1795989142867605000);  // 21:52:22Z
    CHECK(NcclLine(line).text() == "gpu01:1234:1240 [0] NCCL INFO Bootstrap");
    const auto o = nccl_line_origin(line);
    REQUIRE(o);
    CHECK(nccl_file_name("0", o->host, o->pid) == "0.gpu01.1234.log");
    // Without a stamp a line is all text; a bracket that does not close soon says nothing.
    CHECK_FALSE(NcclLine("gpu01:1234:1240 [0] NCCL INFO x").time(stamps));
    CHECK(NcclLine("gpu01:1234:1240 [0] NCCL INFO x").text() == "gpu01:1234:1240 [0] NCCL INFO x");
    CHECK_FALSE(NcclLine("[" + std::string(80, 'x') + "] gpu01:1:2").text());
    CHECK_FALSE(NcclLine("[not a time at all, but closed] gpu01:1:2").time(stamps));
}

TEST_CASE("job log paths and phases", "[node]") {
    Layout l;
    l.log_dir = "/l";
    CHECK(l.job_log(Phase::kEpilog, "7") == "/l/epilog/7.log");
    const auto n = parse_job_log(l.job_log(Phase::kEpilog, "7"));
    REQUIRE(n);
    CHECK(n->phase == Phase::kEpilog);
    CHECK(n->job_id == "7");
    CHECK_FALSE(parse_job_log("/l/other/7.log"));
    CHECK_FALSE(parse_job_log("/l/prolog/../7.log"));
    CHECK_FALSE(parse_job_log("/l/prolog/7x.log"));
    Phase p;
    CHECK_FALSE(parse_phase("../../x", p));
    CHECK(valid_job_id("123"));
    CHECK_FALSE(valid_job_id(""));
    CHECK_FALSE(valid_job_id("1/2"));
    CHECK_FALSE(valid_job_id("123456789012345678901"));
}

TEST_CASE("job marker and step record: one writer, one reader, damaged files read as absent", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    const JobMarker m{"42", "alice", "1000", "gpu01", "INFO:NET", 123456789, {}, {}, 0};
    REQUIRE(write_job_marker(l, m).ok);
    const auto back = read_job_marker(l, "42");
    REQUIRE(back);
    CHECK(back->user == "alice");
    CHECK(back->trace == "INFO:NET");
    CHECK(back->start_ns == 123456789);
    CHECK_FALSE(write_job_marker(l, {"../x", "", "", "", "", 0, {}, {}, 0}).ok);
    // A trace request with bytes that are not UTF-8 must not make the writer throw.
    REQUIRE(write_step_record(l, {"42", "0", std::string("INFO\xff"), 5, "/n/42/0.%h.%p.log"}).ok);
    REQUIRE(write_step_record(l, {"42", "batch", "", 6, ""}).ok);
    std::ofstream(l.steps_dir() + "/43.0") << "{not json";
    std::ofstream(l.jobs_dir() + "/44") << R"({"job_id":"45"})";  // names another job: not 44's
    const auto steps = read_step_records(l);
    REQUIRE(steps.size() == 2);
    CHECK(read_job_markers(l).size() == 1);
    CHECK_FALSE(read_job_marker(l, "44"));
    remove_job_state(l, "42");
    CHECK_FALSE(read_job_marker(l, "42"));
    CHECK(read_step_records(l).empty());
    CHECK(parse_kmsg_mark(to_json(KmsgMark{"b", 17, 3}))->next_seq == 17);
    CHECK_FALSE(parse_kmsg_mark(R"({"next_seq":-1})"));
}

TEST_CASE("a job's end removes its own step records, not those of jobs whose id starts the same", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    for (const char* id : {"1", "12", "120", "123", "129", "1200"})
        for (const char* step : {"0", "batch"}) REQUIRE(write_step_record(l, {id, step, "", 5, ""}).ok);
    remove_job_state(l, "12", 1000);
    std::set<std::string> left;
    for (const auto& r : read_step_records(l)) left.insert(r.job_id + "." + r.step);
    CHECK(left == std::set<std::string>{"1.0", "1.batch", "120.0", "120.batch", "123.0", "123.batch", "129.0",
                                        "129.batch", "1200.0", "1200.batch"});
    remove_job_state(l, "123");
    left.clear();
    for (const auto& r : read_step_records(l)) left.insert(r.job_id + "." + r.step);
    CHECK(left ==
          std::set<std::string>{"1.0", "1.batch", "120.0", "120.batch", "129.0", "129.batch", "1200.0", "1200.batch"});
}

TEST_CASE("the stream schema takes the site's job values from the config", "[node]") {
    jobtrail::test::TempDir d;
    const std::string path = d.path() + "/j.yaml";
    std::ofstream(path) << R"(shipper:
  sources:
    files:
      - {name: logs, paths: ["/l/{prolog,epilog}/*.log"], job: gpu-jobs, format: joblog}
      - {name: nccl, paths: ["/l/nccl/*/*.log"], job: gpu-nccl, format: nccl}
      - {name: fm, paths: ["/var/log/fm.log"], job: gpu-fm, stream: fabric-manager}
)";
    const auto r = jobtrail::config::load_config(path, jobtrail::shipper::source_sections());
    REQUIRE(r.errors.empty());
    const Schema s = jobtrail::config::stream_schema(r.config.shipper);
    CHECK(s.job(StreamKind::kJobLog) == "gpu-jobs");
    CHECK(s.job(StreamKind::kNccl) == "gpu-nccl");
    CHECK(s.job(StreamKind::kFabricManager) == "gpu-fm");
    CHECK(s.job(StreamKind::kKernel) == "kmsg");
    std::ofstream(path) << R"(shipper:
  sources:
    files:
      - {name: fm, paths: ["/var/log/fm.log"], job: gpu-fm, stream: kernel}
)";
    const auto bad = jobtrail::config::load_config(path, jobtrail::shipper::source_sections());
    REQUIRE(bad.errors.size() == 1);
    CHECK(bad.errors[0].key == "shipper.sources.files[0].stream");
}

TEST_CASE("job markers carry the job's devices, and an ended job's is kept with its end time", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    JobMarker m{"42", "alice", "1000", "gpu01", "", 1000, {{"gpu", 3, "0000:3b:00.0", "GPU-x", "S3"}}, "", 0};
    REQUIRE(write_job_marker(l, m).ok);
    auto back = read_job_marker(l, "42");
    REQUIRE(back);
    REQUIRE(back->devices.size() == 1);
    CHECK(back->devices[0].index == 3);
    CHECK(back->devices[0].bdf == "0000:3b:00.0");
    CHECK(back->devices[0].serial == "S3");
    CHECK(read_ended_markers(l).empty());
    // A damaged device entry is left out, never a reason to lose the marker.
    CHECK(
        parse_job_marker(
            R"({"job_id":"5","devices":[{"index":-4,"bdf":"x"},7,{"index":1e30,"bdf":"y"},{"index":2,"bdf":"0000:1b:00.0"}]})")
            ->devices.size() == 1);

    remove_job_state(l, "42", 5000);
    CHECK_FALSE(read_job_marker(l, "42"));
    auto ended = read_ended_markers(l);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0].end_ns == 5000);
    CHECK(ended[0].devices.size() == 1);
    // An hour later the next job's end removes it.
    REQUIRE(write_job_marker(l, {"43", "bob", "1001", "gpu01", "", 2000, {}, "", 0}).ok);
    remove_job_state(l, "43", 5000 + 3601LL * 1'000'000'000);
    ended = read_ended_markers(l);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0].job_id == "43");
}

TEST_CASE("a job marker keeps the job's first 64 devices, a 65th is left out", "[node]") {
    JobMarker m{"42", "alice", "1000", "gpu01", "", 1000, {}, "", 0};
    for (int i = 0; i < 65; ++i) m.devices.push_back({"gpu", i, "0000:3b:00.0", "", ""});
    auto back = parse_job_marker(to_json(m));
    REQUIRE(back);
    REQUIRE(back->devices.size() == 64);
    CHECK(back->devices.back().index == 63);
    m.devices.pop_back();
    back = parse_job_marker(to_json(m));
    REQUIRE(back);
    CHECK(back->devices.size() == 64);
}

TEST_CASE("the last 256 ended jobs are kept within the hour, the 257th end removes the oldest", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    // 255 jobs ended a second apart (written as remove_job_state writes them, without its
    // pass over all of them each time).
    REQUIRE(jobtrail::make_dirs(l.ended_dir(), 0755).ok);
    for (int i = 0; i < 255; ++i) {
        const std::string id = std::to_string(1000 + i);
        const int64_t end = (1 + i) * 1'000'000'000LL;
        REQUIRE(
            jobtrail::write_file_atomic(l.ended_marker(id), to_json({id, "", "", "", "", 1, {}, "", end}), 0644).ok);
    }
    const auto end_job = [&](const std::string& id, int64_t end) {
        REQUIRE(write_job_marker(l, {id, "", "", "", "", 1, {}, "", 0}).ok);
        remove_job_state(l, id, end);
    };
    end_job("2000", 300'000'000'000);  // the 256th
    auto ended = read_ended_markers(l);
    CHECK(ended.size() == 256);
    end_job("2001", 301'000'000'000);  // the 257th: job 1000, the oldest, goes
    ended = read_ended_markers(l);
    CHECK(ended.size() == 256);
    std::set<std::string> ids;
    for (const auto& e : ended) ids.insert(e.job_id);
    CHECK(ids.count("1000") == 0);
    CHECK(ids.count("1001") == 1);
    CHECK(ids.count("2001") == 1);
}

TEST_CASE("a job marker's field of the wrong type or missing reads as empty and the marker is still read", "[node]") {
    auto m = parse_job_marker(R"({"job_id":"5","user":7,"uid":["1000"],"start_ns":"12","end_ns":1.5})");
    REQUIRE(m);
    CHECK(m->job_id == "5");
    CHECK(m->user.empty());
    CHECK(m->uid.empty());
    CHECK(m->start_ns == 0);
    CHECK(m->end_ns == 0);
    m = parse_job_marker(R"({"job_id":"6"})");
    REQUIRE(m);
    CHECK(m->user.empty());
    CHECK(m->node.empty());
    CHECK(m->start_ns == 0);
    CHECK(m->devices.empty());
    CHECK(parse_job_marker(R"({"job_id":"7","start_ns":-3,"devices":{"index":1,"bdf":"x"}})")->start_ns == -3);
    // Not a marker: no object, no job id or one that is not a job's.
    for (const char* bad : {R"(["5"])", R"("5")", R"({"job_id":5})", R"({"job_id":"x"})", R"({"job_id":""})", R"({})"})
        CHECK_FALSE(parse_job_marker(bad));
}

TEST_CASE("a job marker's devices keep their uuid serial and note and only what is known is written", "[node]") {
    JobMarker m{"42", "alice", "1000", "gpu01", "", 1000, {}, "no driver entry for GPU 3", 0};
    m.devices.push_back({"gpu", 0, "0000:1b:00.0", "GPU-a", ""});
    m.devices.push_back({"gpu", 1, "0000:3b:00.0", "", "S1"});
    const std::string text = to_json(m);
    const auto back = parse_job_marker(text);
    REQUIRE(back);
    CHECK(back->devices_note == "no driver entry for GPU 3");
    REQUIRE(back->devices.size() == 2);
    CHECK(back->devices[0].kind == "gpu");
    CHECK(back->devices[0].index == 0);
    CHECK(back->devices[0].uuid == "GPU-a");
    CHECK(back->devices[0].serial.empty());
    CHECK(back->devices[1].uuid.empty());
    CHECK(back->devices[1].serial == "S1");
    // The file has a key only for what is known: one uuid, one serial, no end time.
    const auto count = [&](const std::string& s) {
        size_t n = 0;
        for (size_t at = text.find(s); at != std::string::npos; at = text.find(s, at + 1)) ++n;
        return n;
    };
    CHECK(count("\"uuid\"") == 1);
    CHECK(count("\"serial\"") == 1);
    CHECK(count("\"end_ns\"") == 0);
    const std::string bare = to_json(JobMarker{"43", "bob", "1001", "gpu01", "", 1000, {}, "", 0});
    CHECK(bare.find("devices") == std::string::npos);
    CHECK(parse_job_marker(bare)->devices_note.empty());
}

TEST_CASE("a job marker's device is kept at index 0 to 1000000 with a bus id of 1 to 32 bytes", "[node][hostile]") {
    const auto kept = [](const std::string& device) {
        const auto m = parse_job_marker(R"({"job_id":"5","devices":[)" + device + "]}");
        REQUIRE(m);
        return m->devices.size();
    };
    const std::string b32(32, 'b'), b33(33, 'b');
    CHECK(kept(R"({"index":0,"bdf":"0000:1b:00.0"})") == 1);
    CHECK(kept(R"({"index":1000000,"bdf":"0000:1b:00.0"})") == 1);
    CHECK(kept(R"({"index":2,"bdf":")" + b32 + "\"}") == 1);
    CHECK(kept(R"({"index":-1,"bdf":"0000:1b:00.0"})") == 0);
    CHECK(kept(R"({"index":1000001,"bdf":"0000:1b:00.0"})") == 0);
    CHECK(kept(R"({"index":2,"bdf":")" + b33 + "\"}") == 0);
    CHECK(kept(R"({"index":2,"bdf":""})") == 0);
    CHECK(kept(R"({"index":2})") == 0);
    CHECK(kept(R"({"bdf":"0000:1b:00.0"})") == 0);
    CHECK(kept(R"({"index":"2","bdf":"0000:1b:00.0"})") == 0);
    CHECK(kept(R"({"index":2.5,"bdf":"0000:1b:00.0"})") == 0);
    CHECK(kept(R"("0000:1b:00.0")") == 0);
}

TEST_CASE("a step record keeps its NCCL file and a record that is not its file's is not read", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    REQUIRE(write_step_record(l, {"42", "0", "INFO", 5, "/n/42/0.%h.%p.log"}).ok);
    REQUIRE(write_step_record(l, {"42", "batch", "", 6, ""}).ok);
    auto r = read_step_record(l, "42.0");
    REQUIRE(r);
    CHECK(r->nccl_file == "/n/42/0.%h.%p.log");
    CHECK(r->trace == "INFO");
    CHECK(r->start_ns == 5);
    r = read_step_record(l, "42.batch");
    REQUIRE(r);
    CHECK(r->nccl_file.empty());
    CHECK(to_json(*r).find("nccl_file") == std::string::npos);
    // Another step's record under this name, a damaged one, none: absent.
    std::ofstream(l.steps_dir() + "/43.0") << R"({"job_id":"43","step":"1"})";
    std::ofstream(l.steps_dir() + "/44.0") << "{not json";
    CHECK_FALSE(read_step_record(l, "43.0"));
    CHECK_FALSE(read_step_record(l, "44.0"));
    CHECK_FALSE(read_step_record(l, "45.0"));
    for (const char* bad : {R"({"job_id":"5","step":""})", R"({"job_id":"5"})", R"({"job_id":"x","step":"0"})",
                            R"({"job_id":5,"step":"0"})", R"(["5","0"])"})
        CHECK_FALSE(parse_step_record(bad));
    CHECK(parse_step_record(R"({"job_id":"5","step":"0","trace":3,"start_ns":"9"})")->start_ns == 0);
}

TEST_CASE("a marker file that is damaged or names another job or is a writer's temporary is not a job", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    REQUIRE(write_job_marker(l, {"42", "alice", "1000", "gpu01", "", 1000, {}, "", 0}).ok);
    std::ofstream(l.jobs_dir() + "/46") << "{not json";
    std::ofstream(l.jobs_dir() + "/47") << R"({"job_id":"48"})";
    std::ofstream(l.jobs_dir() + "/49.tmp.123.1") << R"({"job_id":"49"})";
    CHECK_FALSE(read_job_marker(l, "46"));
    CHECK_FALSE(read_job_marker(l, "47"));
    CHECK_FALSE(read_job_marker(l, "../jobs/42"));
    const auto all = read_job_markers(l);
    REQUIRE(all.size() == 1);
    CHECK(all[0].job_id == "42");
    // The same in ended/: only a marker of its own job with an end time is an ended job.
    REQUIRE(jobtrail::make_dirs(l.ended_dir(), 0755).ok);
    const int64_t end = 5'000'000'000'000;
    std::ofstream(l.ended_marker("50")) << to_json(JobMarker{"51", "", "", "", "", 1, {}, "", end});
    std::ofstream(l.ended_marker("52")) << to_json(JobMarker{"52", "", "", "", "", 1, {}, "", 0});
    std::ofstream(l.ended_marker("53")) << "{not json";
    std::ofstream(l.ended_marker("x54")) << to_json(JobMarker{"54", "", "", "", "", 1, {}, "", end});
    std::ofstream(l.ended_marker("55")) << to_json(JobMarker{"55", "", "", "", "", 1, {}, "", 1});
    const auto ended = read_ended_markers(l);
    REQUIRE(ended.size() == 1);
    CHECK(ended[0].job_id == "55");
}

TEST_CASE("an ended job is kept until it is more than an hour older than the latest end", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    const int64_t hour = 3600LL * 1'000'000'000;
    const auto end_job = [&](const std::string& id, int64_t end) {
        REQUIRE(write_job_marker(l, {id, "", "", "", "", 1, {}, "", 0}).ok);
        remove_job_state(l, id, end);
    };
    end_job("1", 10 * hour);
    end_job("2", 10 * hour + 1);
    end_job("3", 11 * hour);  // job 1 ended exactly an hour before: kept
    std::set<std::string> ids;
    for (const auto& e : read_ended_markers(l)) ids.insert(e.job_id);
    CHECK(ids == std::set<std::string>{"1", "2", "3"});
    end_job("4", 11 * hour + 1);  // now job 1 is an hour and 1 ns older: removed
    ids.clear();
    for (const auto& e : read_ended_markers(l)) ids.insert(e.job_id);
    CHECK(ids == std::set<std::string>{"2", "3", "4"});
}

TEST_CASE("a job removed without an end time or without a marker leaves no ended job behind", "[node]") {
    jobtrail::test::TempDir run;
    Layout l;
    l.run_dir = run.path();
    REQUIRE(write_job_marker(l, {"42", "alice", "1000", "gpu01", "", 1000, {}, "", 0}).ok);
    remove_job_state(l, "42");
    CHECK_FALSE(read_job_marker(l, "42"));
    CHECK_FALSE(std::ifstream(l.ended_marker("42")).is_open());
    remove_job_state(l, "43", 5000);  // the prolog never wrote one
    CHECK_FALSE(std::ifstream(l.ended_marker("43")).is_open());
    CHECK(read_ended_markers(l).empty());
}

TEST_CASE("a kernel mark without an unsigned next sequence number is no mark", "[node]") {
    const auto m = parse_kmsg_mark(R"({"boot_id":"b","next_seq":0,"start_ns":5})");
    REQUIRE(m);
    CHECK(m->boot_id == "b");
    CHECK(m->next_seq == 0);
    CHECK(m->start_ns == 5);
    for (const char* bad : {R"({"boot_id":"b"})", R"({"next_seq":"17"})", R"({"next_seq":1.5})", R"([17])", "17"})
        CHECK_FALSE(parse_kmsg_mark(bad));
}
