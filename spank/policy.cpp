#include "policy.hpp"

#include <strings.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string_view>

#include "node/env.hpp"
#include "node/nccl_file.hpp"

namespace jobtrail::spank {
namespace {

// NCCL's debug subsystems (NVIDIA/nccl src/debug.cc, docs env.rst).
constexpr const char* kSubsystems[] = {"INIT", "COLL",    "P2P",        "SHM",   "NET",     "GRAPH", "TUNING",
                                       "ENV",  "ALLOC",   "ALLOC_HOST", "CALL",  "PROXY",   "NVLS",  "BOOTSTRAP",
                                       "REG",  "PROFILE", "RAS",        "VERBS", "DESTROY", "ALL"};

bool copy(char* dst, size_t cap, const char* src) {
    const size_t n = std::strlen(src);
    if (n >= cap) return false;
    std::memcpy(dst, src, n + 1);
    return true;
}

bool parse_bool(const char* v, bool& out) {
    for (const char* t : {"1", "yes", "y", "true", "on"})
        if (strcasecmp(v, t) == 0) return (out = true), true;
    for (const char* f : {"0", "no", "n", "false", "off"})
        if (strcasecmp(v, f) == 0) return (out = false), true;
    return false;
}

// "NET,^COLL" -> true if every item is a known subsystem.
bool valid_subsys(const char* list, std::string& bad) {
    std::string s(list);
    if (s.empty()) return false;
    size_t pos = 0;
    while (pos <= s.size()) {
        size_t end = s.find(',', pos);
        if (end == std::string::npos) end = s.size();
        std::string item = s.substr(pos, end - pos);
        pos = end + 1;
        if (!item.empty() && item[0] == '^') item.erase(0, 1);
        bool ok = false;
        for (const char* k : kSubsystems) ok = ok || strcasecmp(item.c_str(), k) == 0;
        if (!ok) {
            bad = item;
            return false;
        }
    }
    return true;
}

std::string allowed_levels(Level max) {
    std::string s;
    for (Level l : {Level::kWarn, Level::kInfo, Level::kTrace})
        if (l <= max) s += std::string(s.empty() ? "" : ", ") + level_name(l);
    return s;
}

std::string upper(std::string s) {
    for (char& c : s)
        if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
    return s;
}

}  // namespace

PluginConfig default_config() {
    PluginConfig c{};
    c.nccl_debug = Level::kWarn;
    c.trace_level = Level::kInfo;
    c.max_level = Level::kInfo;
    copy(c.trace_subsys, sizeof c.trace_subsys, "INIT,NET,COLL");
    copy(c.nccl_dir, sizeof c.nccl_dir, std::string(node::kDefaultNcclDir).c_str());
    copy(c.run_dir, sizeof c.run_dir, std::string(node::kDefaultRunDir).c_str());
    c.user_env = UserEnv::kCap;
    c.timestamps = true;
    return c;
}

const char* level_name(Level l) {
    switch (l) {
        case Level::kOff:
            return "OFF";
        case Level::kVersion:
            return "VERSION";
        case Level::kWarn:
            return "WARN";
        case Level::kInfo:
            return "INFO";
        case Level::kTrace:
            return "TRACE";
    }
    return "OFF";
}

bool parse_level(const char* s, Level& out) {
    if (!s) return false;
    for (Level l : {Level::kVersion, Level::kWarn, Level::kInfo, Level::kTrace})
        if (strcasecmp(s, level_name(l)) == 0) return (out = l), true;
    if (strcasecmp(s, "off") == 0 || strcasecmp(s, "none") == 0) return (out = Level::kOff), true;
    return false;
}

std::string log_value(std::string_view v) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    const size_t n = std::min(v.size(), kLogValueMax);
    for (size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(v[i]);
        if (c < 0x20 || c >= 0x7f || c == '\\') {
            out += "\\x";
            out += kHex[c >> 4];
            out += kHex[c & 15];
        } else {
            out += static_cast<char>(c);
        }
    }
    if (v.size() > n) out += "...(" + std::to_string(v.size()) + " bytes)";
    return out;
}

bool parse_args(int ac, const char* const* av, PluginConfig& cfg, char* err, size_t errlen) {
    bool ok = true;
    auto fail = [&](const std::string& msg) {
        if (ok) std::snprintf(err, errlen, "%s", msg.c_str());  // the first problem is reported
        ok = false;
    };
    for (int i = 0; i < ac; ++i) {
        const char* arg = av[i];
        const char* eq = std::strchr(arg, '=');
        if (!eq) {
            fail("plugstack argument '" + log_value(arg) + "' is not key=value");
            continue;
        }
        const std::string key(arg, static_cast<size_t>(eq - arg));
        const char* v = eq + 1;
        Level lvl;
        if (key == "nccl_debug" || key == "trace_level" || key == "max_level") {
            if (!parse_level(v, lvl) || (key != "nccl_debug" && lvl < Level::kWarn)) {
                fail("bad value '" + log_value(v) + "' for " + key +
                     (key == "nccl_debug" ? " (expected VERSION, WARN, INFO, TRACE or off)"
                                          : " (expected WARN, INFO or TRACE)"));
                continue;
            }
            (key == "nccl_debug" ? cfg.nccl_debug : key == "trace_level" ? cfg.trace_level : cfg.max_level) = lvl;
        } else if (key == "trace_subsys") {
            std::string bad;
            if (!valid_subsys(v, bad) || !copy(cfg.trace_subsys, sizeof cfg.trace_subsys, v))
                fail("bad value for trace_subsys: unknown NCCL subsystem '" + log_value(bad) + "'");
        } else if (key == "nccl_dir" || key == "run_dir") {
            if (v[0] != '/') {
                fail("bad value '" + log_value(v) + "' for " + key + " (expected an absolute path)");
                continue;
            }
            char* dst = key == "nccl_dir" ? cfg.nccl_dir : cfg.run_dir;
            if (!copy(dst, kPathMax, v)) fail("path for " + key + " is too long");
        } else if (key == "user_env") {
            if (strcasecmp(v, "respect") == 0)
                cfg.user_env = UserEnv::kRespect;
            else if (strcasecmp(v, "cap") == 0)
                cfg.user_env = UserEnv::kCap;
            else if (strcasecmp(v, "override") == 0)
                cfg.user_env = UserEnv::kOverride;
            else
                fail("bad value '" + log_value(v) + "' for user_env (expected respect, cap or override)");
        } else if (key == "timestamps") {
            if (!parse_bool(v, cfg.timestamps))
                fail("bad value '" + log_value(v) + "' for timestamps (expected yes or no)");
        } else {
            fail(
                "unknown plugstack key '" + log_value(key) +
                "' (known: nccl_debug, trace_level, max_level, trace_subsys, nccl_dir, run_dir, user_env, timestamps)");
        }
    }
    if (cfg.trace_level > cfg.max_level) {
        fail(std::string("trace_level=") + level_name(cfg.trace_level) +
             " is above max_level=" + level_name(cfg.max_level));
        cfg.trace_level = cfg.max_level;
    }
    return ok;
}

bool parse_trace(const char* optarg, const PluginConfig& cfg, TraceRequest& out, char* err, size_t errlen) {
    out = TraceRequest{};
    out.requested = true;
    if (!optarg || !*optarg) {
        out.level = cfg.trace_level;
        return true;
    }
    const std::string v(optarg);
    const size_t colon = v.find(':');
    const std::string lvl = v.substr(0, colon);
    Level l;
    if (!parse_level(lvl.c_str(), l) || l < Level::kWarn) {
        std::snprintf(
            err, errlen,
            "invalid --trace-capture level '%s'; allowed: %s, optionally with :SUBSYS,... (e.g. INFO:NET,COLL)",
            log_value(lvl).c_str(), allowed_levels(cfg.max_level).c_str());
        return false;
    }
    if (l > cfg.max_level) {
        std::snprintf(err, errlen, "--trace-capture=%s is above this site's maximum (%s); allowed: %s", level_name(l),
                      level_name(cfg.max_level), allowed_levels(cfg.max_level).c_str());
        return false;
    }
    out.level = l;
    if (colon != std::string::npos) {
        const std::string subsys = upper(v.substr(colon + 1));
        std::string bad;
        if (!valid_subsys(subsys.c_str(), bad) || !copy(out.subsys, sizeof out.subsys, subsys.c_str())) {
            std::snprintf(err, errlen,
                          "invalid NCCL subsystem '%s' in --trace-capture; known: INIT, COLL, P2P, SHM, NET, "
                          "GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, ALL",
                          log_value(bad).c_str());
            return false;
        }
    }
    return true;
}

std::string trace_to_string(const TraceRequest& t) {
    if (!t.requested) return "";
    std::string s = level_name(t.level);
    if (t.subsys[0]) s += std::string(":") + t.subsys;
    return s;
}

std::string step_name(unsigned long id) {
    switch (id) {
        case 0xfffffffbUL:
            return "batch";
        case 0xfffffffcUL:
            return "extern";
        case 0xfffffffaUL:
            return "interactive";
        case 0xfffffffdUL:
            return "pending";
        default:
            return std::to_string(id);
    }
}

node::Layout layout_of(const PluginConfig& cfg) {
    node::Layout l;
    l.nccl_dir = cfg.nccl_dir;
    l.run_dir = cfg.run_dir;
    return l;
}

std::vector<std::pair<std::string, std::string>> step_env(const StepEnvInput& in) {
    const PluginConfig& cfg = *in.cfg;
    std::vector<std::pair<std::string, std::string>> env;
    env.emplace_back(node::env::kStepJobId, in.job_id);
    env.emplace_back(node::env::kStepStepId, in.step);

    Level level = cfg.nccl_debug;
    bool set_level = level != Level::kOff;
    bool user_file = false;
    if (in.trace->requested) {
        level = in.trace->level;
        set_level = true;
        env.emplace_back(node::env::kStepTrace, trace_to_string(*in.trace));
    } else if (in.user_nccl_debug && *in.user_nccl_debug) {
        Level user;
        const bool known = parse_level(in.user_nccl_debug, user);
        switch (cfg.user_env) {
            case UserEnv::kRespect:
                set_level = false;
                level = known ? user : Level::kWarn;
                user_file = in.user_nccl_debug_file != nullptr;
                break;
            case UserEnv::kCap:
                if (known && user <= cfg.max_level) {
                    set_level = false;  // within the cap: theirs stands
                    level = user;
                    user_file = in.user_nccl_debug_file != nullptr;
                } else {
                    level = cfg.max_level;
                    set_level = true;
                }
                break;
            case UserEnv::kOverride:
                set_level = level != Level::kOff;
                break;
        }
    }
    if (set_level) env.emplace_back("NCCL_DEBUG", level_name(level));
    const bool nccl_on = level != Level::kOff;
    if (!nccl_on) return env;
    if (in.trace->requested)
        env.emplace_back("NCCL_DEBUG_SUBSYS", in.trace->subsys[0] ? in.trace->subsys : cfg.trace_subsys);
    if (!user_file && in.nccl_dir_ok)
        env.emplace_back("NCCL_DEBUG_FILE", node::nccl_debug_file(layout_of(cfg), in.job_id, in.step));
    if (cfg.timestamps) {
        // Local time with its offset (the job's TZ untouched), as the shipper parses it back.
        env.emplace_back("NCCL_DEBUG_TIMESTAMP_FORMAT", node::kNcclStampFormat);
        env.emplace_back("NCCL_DEBUG_TIMESTAMP_LEVELS", "ALL");
    }
    return env;
}

}  // namespace jobtrail::spank
