#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/fs.hpp"
#include "forensics/analysis.hpp"
#include "forensics/bundle.hpp"
#include "forensics/bundle/staging.hpp"

namespace jobtrail::forensics::bundle {

// One query (or local file read) as the manifest reports it.
struct QueryRecord {
    QueryRecord() = default;
    QueryRecord(std::string n, std::string q) : name(std::move(n)), logql(std::move(q)) {}
    std::string name, logql;
    uint64_t lines = 0;
    double seconds = 0;
    bool truncated = false, failed = false;
    std::string error;
};

// A file of a user's directory that was not read, and why.
struct Refused {
    std::string path, reason, error;
};

// Where the job ran and when.
struct Window {
    std::vector<std::string> nodes;
    int64_t start_ns = 0, end_ns = 0;
    std::string basis;
};

// What a bundle's records came from, and what stopped it when nothing did (exit_code).
struct Gathered {
    Window window;  // margin included
    std::vector<QueryRecord> queries;
    std::string source;                   // the manifest's: Loki's address, or the local directory
    std::string cluster;                  // the `cluster` label every query matched ("" : none)
    std::set<std::string> missing_nodes;  // in the job's nodelist, without a prolog/epilog record
    std::string nodelist_notes;
    int exit_code = kExitOk;
    std::string error;

    bool any_failed() const;
};

// The records of a bundle, each staged into its file and fed to the analysis (record and
// kernel_time from any thread).
class Collection {
public:
    Collection(const BundleOptions& o, Staging& st, Analyzer& an) : o_(o), st_(st), an_(an) {}
    const BundleOptions& options() const { return o_; }

    void record(const std::string& node, const std::string& source, const std::string& rel, int64_t ts,
                std::string_view raw, int when = 0);
    // A line of the node's DCGM stream, into rel: staged whatever it says, analysed with the
    // entry's labels and structured metadata (Analyzer::add_dcgm).
    void record_dcgm(const std::string& node, const std::string& rel, int64_t ts, std::string_view raw,
                     const loki::LabelSet* labels);
    // Staged, not analysed.
    void stage(const std::string& rel, int64_t ts, std::string_view line) { st_.write(rel, ts, line); }

    // Where a job log line goes in time: kernel records (and their kmsg-dict lines) at the
    // record's own time= (the line is stamped when the collector wrote it), the rest as stamped.
    // `line` is a job log line as the shipper sends it (joblog/shipped.hpp), of `phase`.
    int64_t kernel_time(const std::string& node, const std::string& phase, std::string_view line, int64_t ts);

    // A file of a user's directory left out: said on stderr as it happens, kept for the manifest.
    void refuse(const std::string& name, const SafeFile& f);
    const std::vector<Refused>& refused() const { return refused_; }

private:
    std::vector<Refused> refused_;
    const BundleOptions& o_;
    Staging& st_;
    Analyzer& an_;
    std::mutex an_mu_;
    std::mutex kernel_mu_;
    std::map<std::string, int64_t> last_kernel_;  // node|phase: the last kernel record's time
};

// From Loki (from_loki.cpp): the job found (find_job.hpp), then every query of its nodes.
Gathered gather_from_loki(const BundleOptions& o, Collection& col, Analyzer& an);
// From this node's job logs and NCCL files (from_local.cpp).
Gathered gather_local(const BundleOptions& o, Collection& col);

}  // namespace jobtrail::forensics::bundle
