// jobtrail-shipper: the node daemon. Wiring only: configuration, signals, the pipeline.
#include <malloc.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <csignal>
#include <cstdio>

#include "config/config.hpp"
#include "jobtrail/version.hpp"
#include "shipper/pipeline.hpp"
#include "shipper/sources/registry.hpp"

namespace {
std::atomic<bool> g_stop{false};
void on_signal(int) {
    g_stop = true;
}
}  // namespace

namespace {

int run(int argc, char** argv) {
    CLI::App app{"jobtrail-shipper: ships kernel, Slurm prolog/epilog and NCCL logs to Loki, spooled on disk"};
    std::string config_flag;
    bool check = false, version = false;
    jobtrail::shipper::RunOptions opts;
    double once_timeout_s = 120;
    app.add_option("-c,--config", config_flag,
                   "configuration file (default $JOBTRAIL_CONFIG, then /etc/jobtrail/jobtrail.yaml)");
    app.add_flag("--check-config", check,
                 "check the configuration and exit (0, or a message naming file, line and key)");
    app.add_flag("--once", opts.once, "ship everything readable now, wait until Loki acknowledged it, exit");
    app.add_option("--once-timeout", once_timeout_s, "seconds --once waits for Loki before failing (default 120)");
    app.add_flag("--dry-run", opts.dry_run, "print the streams and lines that would be sent; change nothing");
    app.add_flag("--version", version, "print the version and exit");
    CLI11_PARSE(app, argc, argv);
    if (version) {
        std::printf("jobtrail-shipper %s\n", jobtrail::kVersion);
        return 0;
    }
    opts.once_timeout_ms = static_cast<int64_t>(once_timeout_s * 1000);
    const std::string path = jobtrail::config::resolve_config_path(config_flag);
    const auto loaded = jobtrail::config::load_config(path, jobtrail::shipper::source_sections());
    if (loaded.file_missing && !config_flag.empty()) {
        std::fprintf(stderr, "jobtrail-shipper: error: %s: no such file\n", path.c_str());
        return 1;
    }
    for (const auto& e : loaded.errors) std::fprintf(stderr, "jobtrail-shipper: error: %s\n", e.text().c_str());
    if (!loaded.errors.empty()) return 1;
    if (check) {
        std::printf("%s: ok\n", loaded.file_missing ? "(defaults)" : path.c_str());
        return 0;
    }
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);
    std::signal(SIGPIPE, SIG_IGN);
    jobtrail::shipper::Pipeline pipeline(loaded.config);
    return pipeline.run(opts, g_stop);
}

}  // namespace

int main(int argc, char** argv) {
    // Buffers pass from thread to thread (source, sender, its workers): with an arena per
    // thread each kept its own peak, a tenth of the shipper's resident memory.
    ::mallopt(M_ARENA_MAX, 2);
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        // Nothing read is lost: positions advance only with the spool, which is durable.
        std::fprintf(stderr, "jobtrail-shipper: fatal: %s\n", e.what());
    }
    return 1;
}
