#include "forensics/bundle/manifest.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "common/time.hpp"
#include "forensics/bundle/archive.hpp"
#include "jobtrail/version.hpp"

namespace jobtrail::forensics::bundle {

std::string manifest_json(const BundleOptions& o, int64_t started_ns, const Gathered& g,
                          const std::vector<Refused>& refused, const StagingDir& dir,
                          const std::vector<std::string>& files) {
    nlohmann::ordered_json mq = nlohmann::ordered_json::array();
    for (const auto& q : g.queries)
        mq.push_back({{"name", q.name},
                      {"query", q.logql},
                      {"lines", q.lines},
                      {"seconds", q.seconds},
                      {"truncated", q.truncated},
                      {"failed", q.failed},
                      {"error", q.error}});
    nlohmann::ordered_json mr = nlohmann::ordered_json::array();
    for (const auto& r : refused) mr.push_back({{"path", r.path}, {"reason", r.reason}, {"error", r.error}});
    nlohmann::ordered_json mf = nlohmann::ordered_json::array();
    for (const auto& f : files) {
        struct stat sb {};
        std::string sum;
        if (auto in = dir.open_file(f, O_RDONLY); in.ok && ::fstat(in.value.get(), &sb) == 0)
            sum = sha256_fd(in.value.get());
        mf.push_back({{"path", f}, {"bytes", sb.st_size}, {"sha256", sum}});
    }
    const Window& w = g.window;
    const nlohmann::ordered_json manifest = {{"jobtrail_version", kVersion},
                                             {"command", o.command_line},
                                             {"created", format_rfc3339_ns(started_ns)},
                                             {"source", g.source},
                                             {"job",
                                              {{"id", o.job_id},
                                               {"cluster", g.cluster.empty() ? o.cluster : g.cluster},
                                               {"nodes", w.nodes},
                                               {"missing_nodes", g.missing_nodes},
                                               {"basis", w.basis}}},
                                             {"window",
                                              {{"start", format_rfc3339_ns(w.start_ns)},
                                               {"end", format_rfc3339_ns(w.end_ns)},
                                               {"margin_s", o.margin_ns / 1'000'000'000}}},
                                             {"queries", mq},
                                             {"complete", g.missing_nodes.empty() && !g.any_failed()},
                                             {"refused", mr},
                                             {"files", mf}};
    return manifest.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace jobtrail::forensics::bundle
