#include "collector/cli.hpp"

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <exception>

#include "config/config.hpp"
#include "jobtrail/version.hpp"

namespace jobtrail::collector {

int collector_main(int argc, char** argv, const char* prog, const std::function<int(const std::string&)>& run) {
    // Inherited dispositions must not break waitpid (SIG_IGN on SIGCHLD) or kill us on a
    // closed pipe.
    std::signal(SIGCHLD, SIG_DFL);
    std::signal(SIGPIPE, SIG_IGN);

    std::string config_flag;
    bool version = false;
    try {
        CLI::App app{std::string(prog) + ": Slurm " +
                     (std::string(prog).find("epilog") != std::string::npos ? "Epilog" : "Prolog") +
                     " collector of jobtrail (configure it as slurm.conf " +
                     (std::string(prog).find("epilog") != std::string::npos ? "Epilog=" : "Prolog=") + ")"};
        app.add_option(
            "-c,--config", config_flag,
            std::string("configuration file (default $JOBTRAIL_CONFIG, then ") + config::kDefaultConfigPath + ")");
        app.add_flag("--version", version, "print the version and exit");
        app.allow_extras();
        try {
            app.parse(argc, argv);
        } catch (const CLI::CallForHelp& e) {
            return app.exit(e);
        } catch (const CLI::ParseError& e) {
            std::fprintf(stderr, "%s: warning: ignoring bad arguments: %s\n", prog, e.what());
        }
        if (!app.remaining().empty())
            std::fprintf(stderr, "%s: warning: ignoring %zu unexpected arguments\n", prog, app.remaining().size());
        if (version) {
            std::printf("%s %s\n", prog, kVersion);
            return 0;
        }
        return run(config::resolve_config_path(config_flag));
    } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: error: internal failure, exiting 0 so the node is not drained: %s\n", prog, e.what());
    } catch (...) {
        std::fprintf(stderr, "%s: error: internal failure, exiting 0 so the node is not drained\n", prog);
    }
    return 0;
}

void guarded(Session& s, const char* step, const std::function<void()>& fn) {
    try {
        fn();
    } catch (const std::exception& e) {
        s.notice("error", std::string(step) + " failed: " + e.what());
    } catch (...) {
        s.notice("error", std::string(step) + " failed");
    }
}

}  // namespace jobtrail::collector
