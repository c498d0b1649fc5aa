#pragma once

#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "joblog/format.hpp"
#include "temp_dir.hpp"

namespace jobtrail::test {

// One job as slurmd would hand it to a collector: SLURM_JOB_ID set, a config whose paths all lie
// in a scratch directory (logs, state, run dir, `bin/` as the probes' PATH) plus `extra` YAML
// under `collector:` (each "@DIR@" in it replaced by that directory), and the job log read back.
class CollectorJob {
public:
    explicit CollectorJob(const std::string& extra, const std::string& job_id = "4242") : job_id_(job_id) {
        ::mkdir((dir_.path() + "/bin").c_str(), 0755);
        std::ofstream(config()) << "collector:\n  log_dir: " << dir_.path() << "/log\n  state_dir: " << dir_.path()
                                << "/state\n  run_dir: " << dir_.path() << "/run\n  path: " << dir_.path()
                                << "/bin\n  kill_grace: 50ms\n"
                                << with_dir(extra);
        ::setenv("SLURM_JOB_ID", job_id.c_str(), 1);
    }
    ~CollectorJob() { ::unsetenv("SLURM_JOB_ID"); }
    CollectorJob(const CollectorJob&) = delete;
    CollectorJob& operator=(const CollectorJob&) = delete;

    const std::string& dir() const { return dir_.path(); }
    std::string config() const { return dir_.path() + "/cfg.yaml"; }

    // An executable shell script at dir()/name.
    std::string script(const std::string& name, const std::string& body) const {
        const std::string path = dir_.path() + "/" + name;
        std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
        ::chmod(path.c_str(), 0755);
        return path;
    }

    struct Line {
        std::string tag, name, text;
    };
    // The job log of `phase` ("prolog", "epilog"), line by line.
    std::vector<Line> log(const std::string& phase) const {
        std::vector<Line> out;
        std::ifstream in(dir_.path() + "/log/" + phase + "/" + job_id_ + ".log");
        for (std::string raw; std::getline(in, raw);) {
            joblog::Line l;
            if (joblog::parse_line(raw, l))
                out.push_back({std::string(l.tag), std::string(l.name), std::string(l.text)});
        }
        return out;
    }
    // The text of the first line with this tag and name, or "(none)".
    std::string text(const std::string& phase, std::string_view tag, const std::string& name) const {
        for (const auto& l : log(phase))
            if (l.tag == tag && l.name == name) return l.text;
        return "(none)";
    }

private:
    std::string with_dir(std::string s) const {
        for (size_t at; (at = s.find("@DIR@")) != std::string::npos;) s.replace(at, 5, dir_.path());
        return s;
    }

    TempDir dir_{"collector"};
    std::string job_id_;
};

}  // namespace jobtrail::test
