#include "collector/scripts.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>

#include "common/time.hpp"
#include "joblog/format.hpp"
#include "process/runner.hpp"

namespace jobtrail::collector {
namespace {

std::string basename_of(const std::string& p) {
    const size_t slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size())
        s.replace(pos, from.size(), to);
    return s;
}

process::RunResult run_logged(Session& s, const std::vector<std::string>& argv, const std::string& name,
                              std::string_view out_tag, std::string_view err_tag, int64_t timeout_ms,
                              std::vector<std::string>* keep = nullptr) {
    auto& log = s.log();
    log.line(realtime_ns(), joblog::kRun, name, "command=" + argv[0] + " timeout_ms=" + std::to_string(timeout_ms));
    process::RunOptions opts;
    opts.timeout_ms = timeout_ms;
    opts.kill_grace_ms = s.config().collector.kill_grace_ms;
    opts.max_line_bytes = s.config().collector.max_line_bytes;
    opts.env = s.child_env();
    auto res = process::run(argv, opts, [&](process::Stream st, int64_t ts, std::string_view line) {
        log.line(ts, st == process::Stream::kStdout ? out_tag : err_tag, name, line);
        if (keep && st == process::Stream::kStdout && keep->size() < 256) keep->emplace_back(line.substr(0, 1024));
    });
    std::string text = "status=" + std::to_string(res.shell_status()) +
                       " duration_ms=" + std::to_string(res.duration_ms) + " result=\"" + res.describe() + "\"";
    if (!res.error.empty() && res.started) text += " error=\"" + res.error + "\"";
    log.line(realtime_ns(), joblog::kStatus, name, text, /*force=*/true);
    log.flush();
    return res;
}

}  // namespace

std::vector<std::string> expand_scripts(const std::vector<std::string>& patterns, std::vector<std::string>& errors) {
    std::vector<std::string> out;
    for (const auto& pat : patterns) {
        glob_t g{};
        const int rc = ::glob(pat.c_str(), GLOB_ERR, nullptr, &g);
        if (rc == 0) {
            std::vector<std::string> matches(g.gl_pathv, g.gl_pathv + g.gl_pathc);
            std::sort(matches.rbegin(), matches.rend());
            for (auto& m : matches) {
                struct stat st {};
                if (::stat(m.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
                out.push_back(std::move(m));
            }
        } else if (rc != GLOB_NOMATCH) {
            errors.push_back("cannot expand script pattern '" + pat + "'");
        }
        globfree(&g);
    }
    return out;
}

ScriptsOutcome run_site_scripts(Session& s) {
    ScriptsOutcome o;
    std::vector<std::string> errors;
    const auto& pc = s.phase_config();
    const auto scripts = expand_scripts(pc.scripts, errors);
    for (const auto& e : errors) s.notice("error", e);
    // total_timeout covers the site scripts only (like PrologEpilogTimeout): time jobtrail spends
    // on its own probes or kmsg must never make a site script fail.
    const int64_t deadline = monotonic_ns() + pc.total_timeout_ms * 1'000'000;
    for (const auto& script : scripts) {
        const int64_t left = (deadline - monotonic_ns()) / 1'000'000;
        if (left <= 0) {
            // The total budget is gone: slurmd would have killed the whole Prolog by now.
            s.notice("error", "total_timeout reached before " + script + " could run; counted as failed");
            o.status = 124;
            o.failed = script;
            break;
        }
        const auto res = run_logged(s, {script}, basename_of(script), joblog::kStdout, joblog::kStderr,
                                    std::min(pc.script_timeout_ms, left));
        ++o.ran;
        if (res.timed_out) s.notice("error", script + " timed out and was killed with its process group");
        if (const int st = res.shell_status(); st != 0) {
            o.status = st;
            o.failed = script;
            break;
        }
    }
    return o;
}

std::map<std::string, std::vector<std::string>> run_probes(Session& s) {
    std::map<std::string, std::vector<std::string>> out;
    const auto& pc = s.phase_config();
    const auto& path = s.config().collector.path;
    for (const auto& probe : pc.probes) {
        const std::string exe = process::find_in_path(probe.argv[0], path);
        if (exe.empty()) {
            s.log().line(realtime_ns(), joblog::kStatus, probe.name,
                         "status=skipped result=\"" + probe.argv[0] + " not found in " + path + "\"");
            continue;
        }
        std::vector<std::string> argv;
        argv.push_back(exe);
        for (size_t i = 1; i < probe.argv.size(); ++i)
            argv.push_back(replace_all(probe.argv[i], "{job_id}", s.facts().job_id));
        auto& keep = out[probe.name];
        const auto res = run_logged(s, argv, probe.name, joblog::kProbe, joblog::kProbeErr, probe.timeout_ms, &keep);
        if (res.timed_out) s.notice("warning", "probe " + probe.name + " timed out; killed and skipped");
    }
    return out;
}

}  // namespace jobtrail::collector
