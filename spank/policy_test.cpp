#include "policy.hpp"

#include <catch2/catch.hpp>
#include <map>

using namespace jobtrail::spank;

namespace {

PluginConfig cfg_from(std::vector<const char*> args, bool* ok = nullptr, std::string* err = nullptr) {
    PluginConfig c = default_config();
    char e[512] = "";
    const bool r = parse_args(static_cast<int>(args.size()), args.data(), c, e, sizeof e);
    if (ok) *ok = r;
    if (err) *err = e;
    return c;
}

std::map<std::string, std::string> env_of(const StepEnvInput& in) {
    std::map<std::string, std::string> m;
    for (auto& [k, v] : step_env(in)) m[k] = v;
    return m;
}

}  // namespace

TEST_CASE("plugstack arguments: defaults, values, strictness", "[spank]") {
    bool ok = false;
    std::string err;
    auto d = cfg_from({}, &ok);
    CHECK(ok);
    CHECK(d.nccl_debug == Level::kWarn);
    CHECK(std::string(d.nccl_dir) == "/var/log/slurm/nccl");
    auto c = cfg_from({"nccl_debug=off", "trace_level=TRACE", "max_level=trace", "trace_subsys=NET,^COLL",
                       "nccl_dir=/scratch/nccl", "user_env=override", "timestamps=no"},
                      &ok);
    CHECK(ok);
    CHECK(c.nccl_debug == Level::kOff);
    CHECK(c.trace_level == Level::kTrace);
    CHECK(std::string(c.trace_subsys) == "NET,^COLL");
    CHECK(c.user_env == UserEnv::kOverride);
    CHECK_FALSE(c.timestamps);

    cfg_from({"nccl_debug=WARN", "colour=blue"}, &ok, &err);
    CHECK_FALSE(ok);
    CHECK(err.find("unknown plugstack key 'colour'") != std::string::npos);
    cfg_from({"nccl_debug=LOUD"}, &ok, &err);
    CHECK_FALSE(ok);
    CHECK(err.find("nccl_debug") != std::string::npos);
    cfg_from({"nccl_dir=relative"}, &ok, &err);
    CHECK(err.find("absolute") != std::string::npos);
    cfg_from({"trace_subsys=NET,BOGUS"}, &ok, &err);
    CHECK(err.find("BOGUS") != std::string::npos);
    cfg_from({"novalue"}, &ok, &err);
    CHECK(err.find("key=value") != std::string::npos);
    auto capped = cfg_from({"trace_level=TRACE"}, &ok, &err);  // max_level stays INFO
    CHECK_FALSE(ok);
    CHECK(capped.trace_level == Level::kInfo);
}

TEST_CASE("values of the trace-capture option", "[spank]") {
    const PluginConfig c = default_config();  // trace INFO, max INFO
    TraceRequest t{};
    char err[512];
    REQUIRE(parse_trace(nullptr, c, t, err, sizeof err));
    CHECK(t.requested);
    CHECK(t.level == Level::kInfo);
    CHECK(trace_to_string(t) == "INFO");
    REQUIRE(parse_trace("warn", c, t, err, sizeof err));
    CHECK(t.level == Level::kWarn);
    REQUIRE(parse_trace("INFO:net,coll", c, t, err, sizeof err));
    CHECK(trace_to_string(t) == "INFO:NET,COLL");
    CHECK_FALSE(parse_trace("TRACE", c, t, err, sizeof err));
    CHECK(std::string(err) == "--trace-capture=TRACE is above this site's maximum (INFO); allowed: WARN, INFO");
    CHECK_FALSE(parse_trace("LOUD", c, t, err, sizeof err));
    CHECK(std::string(err).find("allowed: WARN, INFO") != std::string::npos);
    CHECK_FALSE(parse_trace("INFO:NOPE", c, t, err, sizeof err));
    CHECK(std::string(err).find("'NOPE'") != std::string::npos);
    CHECK_FALSE(parse_trace("VERSION", c, t, err, sizeof err));
}

TEST_CASE("a user's value reaches slurmd's log as one escaped, bounded line", "[spank]") {
    CHECK(log_value("INFO") == "INFO");
    CHECK(log_value("a\nb\rc\td\x1b[31m") == "a\\x0ab\\x0dc\\x09d\\x1b[31m");
    CHECK(log_value("back\\slash") == "back\\x5cslash");  // a typed "\x0a" stays distinguishable
    CHECK(log_value(std::string("nul\0x", 5)) == "nul\\x00x");
    CHECK(log_value("\xc3\xbc\x7f") == "\\xc3\\xbc\\x7f");
    const std::string huge(100'000, 'A');
    CHECK(log_value(huge) == std::string(kLogValueMax, 'A') + "...(100000 bytes)");

    // What trace_cb logs: the user's --trace-capture text, escaped and cut, in every error.
    const PluginConfig c = default_config();
    TraceRequest t{};
    char err[512];
    const std::string forged = "INFO\njobtrail: error: node drained by admin\n";
    for (const std::string& v : {std::string("LOUD\nforged: line"), std::string("INFO:NET,NOPE\nforged: line"),
                                 forged + ":NET", "INFO:" + forged, std::string(5000, 'X') + "\n"}) {
        INFO(v);
        CHECK_FALSE(parse_trace(v.c_str(), c, t, err, sizeof err));
        const std::string e(err);
        CHECK(e.find('\n') == std::string::npos);
        CHECK(e.find('\r') == std::string::npos);
        CHECK(e.size() < 300);
    }
    CHECK_FALSE(parse_trace("LOUD\nforged", c, t, err, sizeof err));
    CHECK(std::string(err).find("'LOUD\\x0aforged'") != std::string::npos);
}

TEST_CASE("step environment: exactly the policy's variables", "[spank]") {
    const PluginConfig c = default_config();
    TraceRequest none{};
    StepEnvInput in{&c, &none, "42", "batch", true, nullptr, nullptr};
    auto e = env_of(in);
    CHECK(e == std::map<std::string, std::string>{{"JOBTRAIL_JOB_ID", "42"},
                                                  {"JOBTRAIL_STEP_ID", "batch"},
                                                  {"NCCL_DEBUG", "WARN"},
                                                  {"NCCL_DEBUG_FILE", "/var/log/slurm/nccl/42/batch.%h.%p.log"},
                                                  {"NCCL_DEBUG_TIMESTAMP_FORMAT", "[%FT%T.%6f%z] "},
                                                  {"NCCL_DEBUG_TIMESTAMP_LEVELS", "ALL"}});
    CHECK(e.count("TZ") == 0);

    TraceRequest t{};
    char err[256];
    REQUIRE(parse_trace("INFO:NET", c, t, err, sizeof err));
    in.trace = &t;
    in.step = "0";
    e = env_of(in);
    CHECK(e["NCCL_DEBUG"] == "INFO");
    CHECK(e["NCCL_DEBUG_SUBSYS"] == "NET");
    CHECK(e["JOBTRAIL_TRACE"] == "INFO:NET");
    CHECK(e["NCCL_DEBUG_FILE"] == "/var/log/slurm/nccl/42/0.%h.%p.log");
    REQUIRE(parse_trace("", c, t, err, sizeof err));
    CHECK(env_of(in)["NCCL_DEBUG_SUBSYS"] == "INIT,NET,COLL");

    // the directory could not be made: no file, the rest stands
    in.nccl_dir_ok = false;
    CHECK(env_of(in).count("NCCL_DEBUG_FILE") == 0);
}

TEST_CASE("a user's own NCCL_DEBUG: respected, capped or overridden", "[spank]") {
    PluginConfig c = default_config();
    TraceRequest none{};
    StepEnvInput in{&c, &none, "7", "0", true, "TRACE", nullptr};
    c.user_env = UserEnv::kCap;
    CHECK(env_of(in)["NCCL_DEBUG"] == "INFO");  // above max INFO: capped
    in.user_nccl_debug = "WARN";
    CHECK(env_of(in).count("NCCL_DEBUG") == 0);  // within the cap: theirs stands
    c.user_env = UserEnv::kRespect;
    in.user_nccl_debug = "TRACE";
    in.user_nccl_debug_file = "/home/u/nccl.%p";
    auto e = env_of(in);
    CHECK(e.count("NCCL_DEBUG") == 0);
    CHECK(e.count("NCCL_DEBUG_FILE") == 0);
    c.user_env = UserEnv::kOverride;
    CHECK(env_of(in)["NCCL_DEBUG"] == "WARN");
    // policy off and no user setting: nothing NCCL at all
    c.nccl_debug = Level::kOff;
    in.user_nccl_debug = nullptr;
    e = env_of(in);
    CHECK(e.size() == 2);
}

TEST_CASE("special step ids have names", "[spank]") {
    CHECK(step_name(0) == "0");
    CHECK(step_name(0xfffffffbUL) == "batch");
    CHECK(step_name(0xfffffffcUL) == "extern");
}
