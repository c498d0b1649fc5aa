#include "forensics/logql.hpp"

#include "common/text.hpp"
#include "joblog/format.hpp"
#include "joblog/shipped.hpp"

namespace jobtrail::forensics {
namespace {

std::string regex_quote(std::string_view v) {
    std::string out;
    for (const char c : v) {
        if (std::string_view(".^$|()[]{}*+?\\").find(c) != std::string_view::npos) out += '\\';
        out += c;
    }
    return out;
}

// {job="<the schema's job for this kind>"<, cluster="<the scope's>"><, more matchers>}
std::string selector(const Scope& s, node::StreamKind kind, const std::string& more = "") {
    return "{" + std::string(node::label::kJob) + "=" + logql_string(s.schema.job(kind)) +
           (s.cluster.empty() ? "" : ", " + std::string(node::label::kCluster) + "=" + logql_string(s.cluster)) +
           (more.empty() ? "" : ", " + more) + "}";
}

std::string slurmd_matchers(const std::string& nodes) {
    return std::string(node::label::kUnit) + "=\"slurmd.service\", " + nodes;
}

// slurmd names a job as "JobId=4242", "job 4242", "StepId=4242.0", "job_id 4242": the id as a
// whole word catches them all (RE2, so \b works).
std::string job_word(const std::string& job_id) {
    return " |~ " + logql_string("\\b" + job_id + "\\b");
}

std::string job_id_matcher(const std::string& job_id) {
    return std::string(node::label::kJobId) + "=" + logql_string(job_id);
}

}  // namespace

std::string logql_string(std::string_view v) {
    std::string out;
    append_quoted(out, v);
    return out;
}

std::string node_matcher(const std::vector<std::string>& nodes) {
    if (nodes.size() == 1) return "node=" + logql_string(nodes[0]);
    std::string alt;
    for (const auto& n : nodes) alt += (alt.empty() ? "" : "|") + regex_quote(n);
    return "node=~" + logql_string(alt);
}

std::string prolog_epilog_query(const Scope& s, const std::string& job_id, const std::vector<std::string>& nodes) {
    return selector(s, node::StreamKind::kJobLog,
                    job_id_matcher(job_id) + (nodes.empty() ? "" : ", " + node_matcher(nodes)));
}

std::string nccl_query(const Scope& s, const std::string& job_id, const std::string& node) {
    return selector(s, node::StreamKind::kNccl,
                    job_id_matcher(job_id) + (node.empty() ? "" : ", " + node_matcher({node})));
}

std::string nccl_step_query(const Scope& s, const std::string& job_id, const std::string& node) {
    return nccl_query(s, job_id, node) + " | step!=\"\"";
}

std::string kernel_query(const Scope& s, const std::string& node) {
    return selector(s, node::StreamKind::kKernel, node_matcher({node}));
}

std::string node_jobs_query(const Scope& s, const std::string& node) {
    return selector(s, node::StreamKind::kJobLog, node_matcher({node})) + " |~ " +
           logql_string(joblog::shipped_tags_pattern({joblog::kMeta, joblog::kDevice, joblog::kEnd}));
}

std::string slurmd_query(const Scope& s, const std::string& node, const std::string& job_id) {
    return selector(s, node::StreamKind::kJournal, slurmd_matchers(node_matcher({node}))) + job_word(job_id);
}

std::string fabric_manager_query(const Scope& s, const std::string& node) {
    return selector(s, node::StreamKind::kFabricManager, node_matcher({node}));
}

std::string dcgm_query(const Scope& s, const std::string& node) {
    return selector(s, node::StreamKind::kDcgm, node_matcher({node}));
}

std::string dcgm_xid_query(const Scope& s, const std::vector<std::string>& nodes) {
    return selector(s, node::StreamKind::kDcgm, nodes.empty() ? std::string() : node_matcher(nodes)) +
           " |~ \"^XID [0-9]+ on GPU [0-9]+$\"";
}

std::string stream_selector(const Scope& s, node::StreamKind kind, const std::vector<std::string>& nodes) {
    return selector(s, kind, nodes.empty() ? std::string() : node_matcher(nodes));
}

std::string xid_query(const Scope& s, const std::vector<std::string>& nodes) {
    return selector(s, node::StreamKind::kKernel, nodes.empty() ? std::string() : node_matcher(nodes)) +
           " |~ \"^NVRM: Xid|^nvidia-nvswitch[0-9]*: SXid\"";
}

std::vector<NamedQuery> job_queries(const Scope& s, const std::string& job_id, const std::vector<std::string>& nodes,
                                    bool structured_metadata) {
    using node::StreamKind;
    std::vector<NamedQuery> q;
    q.push_back({"prolog and epilog", prolog_epilog_query(s, job_id)});
    q.push_back({"NCCL warnings", nccl_query(s, job_id) + " |= \"NCCL WARN\""});
    q.push_back({"NCCL, all lines", nccl_query(s, job_id)});
    if (!nodes.empty()) {
        const std::string nm = node_matcher(nodes);
        q.push_back({"kernel log of the job's nodes", selector(s, StreamKind::kKernel, nm)});
        q.push_back({"Xid and SXid on the job's nodes",
                     selector(s, StreamKind::kKernel, nm) + " |~ \"^NVRM: Xid|^nvidia-nvswitch[0-9]*: SXid\""});
        q.push_back(
            {"slurmd about this job", selector(s, StreamKind::kJournal, slurmd_matchers(nm)) + job_word(job_id)});
        q.push_back({"fabric manager on the job's nodes", selector(s, StreamKind::kFabricManager, nm)});
        q.push_back({"DCGM events on the job's nodes", selector(s, StreamKind::kDcgm, nm)});
        q.push_back({"Xid count by node", "sum by (node) (count_over_time(" + selector(s, StreamKind::kKernel, nm) +
                                              " |~ \"^NVRM: Xid\" [5m]))"});
    }
    if (structured_metadata) {
        // The shipper's attribution (devices/attribution.hpp): the job's own records are one
        // equality; node-wide ones list it among the jobs running then.
        q.push_back(
            {"kernel records of this job: its devices, its memory cgroup (structured metadata)",
             selector(s, StreamKind::kKernel) + " | " + node::metadata::kSlurmJobId + "=" + logql_string(job_id)});
        q.push_back(
            {"DCGM events on this job's GPUs (structured metadata)",
             selector(s, StreamKind::kDcgm) + " | " + node::metadata::kSlurmJobId + "=" + logql_string(job_id)});
        q.push_back({"node-wide kernel records while the job ran (structured metadata)",
                     selector(s, StreamKind::kKernel) + " | " + node::metadata::kAttribution + "=\"node\" | " +
                         node::metadata::kSlurmJobsRunning + "=~" + logql_string("(.*,)?" + job_id + "(,.*)?")});
    }
    return q;
}

}  // namespace jobtrail::forensics
