// make_bundle: the steps of a bundle. Each step's work is in bundle/: the records gathered
// (from_loki.cpp with find_job.cpp, or from_local.cpp) into staged files (staging.cpp), the
// timeline, the summary's notes, the manifest and the archive.
#include "forensics/bundle.hpp"

#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/analysis.hpp"
#include "forensics/bundle/archive.hpp"
#include "forensics/bundle/collection.hpp"
#include "forensics/bundle/manifest.hpp"
#include "forensics/bundle/names.hpp"
#include "forensics/bundle/notes.hpp"
#include "forensics/bundle/staging.hpp"
#include "forensics/bundle/timeline.hpp"
#include "forensics/report.hpp"
#include "forensics/staging_dir.hpp"

namespace jobtrail::forensics {

BundleResult make_bundle(const BundleOptions& o) {
    using namespace bundle;
    BundleResult res;
    auto stop = [&res](int exit_code, std::string why) {
        res.exit_code = exit_code;
        res.error = std::move(why);
        return res;
    };
    auto fail = [&res, &stop](std::string why) {  // no bundle
        res.archive.clear();
        return stop(kExitError, std::move(why));
    };
    if (!node::valid_job_id(o.job_id))
        return stop(kExitUsage, "bad job id \"" + escape_line(o.job_id) + "\": want the numeric Slurm job id");
    const int64_t started = realtime_ns();
    // Gone on every way out, exceptions included.
    auto staging = StagingDir::create(o.out_dir, ".jobtrail-job" + path_component(o.job_id));
    if (!staging.ok) return fail(staging.error);
    StagingDir& dir = staging.value;

    // The records, staged into their files and analysed as they come.
    Staging st(dir);
    Analyzer an;
    Collection col(o, st, an);
    const Gathered g = o.local ? gather_local(o, col) : gather_from_loki(o, col, an);
    if (g.exit_code != kExitOk) return stop(g.exit_code, g.error);
    st.close();
    if (o.local && st.files().empty())
        return stop(kExitNotFound, "job " + o.job_id + ": no job logs under " + o.log_dir);

    // What they say: the timeline, the summary and the report.
    JobFacts& facts = an.facts();
    facts.job_id = o.job_id;
    facts.nodes = g.window.nodes;
    facts.start_ns = g.window.start_ns;
    facts.end_ns = g.window.end_ns;
    // The cluster the queries matched; locally, the one named, else what the records say.
    if (!g.cluster.empty()) facts.cluster = g.cluster;
    if (!o.cluster.empty()) facts.cluster = o.cluster;
    if (facts.cluster.empty()) facts.cluster = "default";
    write_timeline(st);
    res.summary = an.summary_text() + summary_notes(o, g);
    if (auto ws = dir.write_file("summary.txt", res.summary); !ws.ok) return fail(ws.error);
    const auto findings = an.findings();
    if (auto ws = dir.write_file("report.html", render_report_html(facts, findings, an.likely_cause(findings))); !ws.ok)
        return fail(ws.error);

    // The manifest of it all, then the archive.
    std::vector<std::string> files(st.files().begin(), st.files().end());
    files.insert(files.begin(), {"summary.txt", "timeline.txt", "report.html"});
    if (auto ws = dir.write_file("manifest.json", manifest_json(o, started, g, col.refused(), dir, files)); !ws.ok)
        return fail(ws.error);
    files.insert(files.begin(), "manifest.json");
    const std::string top =
        path_component(facts.cluster) + "-job" + path_component(o.job_id) + "-" + utc_stamp(started);
    const auto archive = publish_archive(dir, top, files);
    res.archive = archive.path;
    if (!archive.status.ok)
        return archive.published ? stop(kExitError, archive.status.error) : fail(archive.status.error);
    if (!g.missing_nodes.empty() || g.any_failed()) return stop(kExitPartial, partial_reason(g));
    return res;
}

}  // namespace jobtrail::forensics
