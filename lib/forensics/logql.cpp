#include "forensics/logql.hpp"

#include "common/text.hpp"

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

std::string prolog_epilog_query(const std::string& job_id) {
    return "{job=\"slurm-prolog-epilog\", job_id=" + logql_string(job_id) + "}";
}

std::string nccl_query(const std::string& job_id, const std::string& node) {
    return "{job=\"nccl\", job_id=" + logql_string(job_id) + (node.empty() ? "" : ", node=" + logql_string(node)) + "}";
}

std::string kernel_query(const std::string& node) {
    return "{job=\"kmsg\", node=" + logql_string(node) + "}";
}

std::string slurmd_query(const std::string& node, const std::string& job_id) {
    // slurmd names a job as "JobId=4242", "job 4242", "StepId=4242.0", "job_id 4242": the id
    // as a whole word catches them all (RE2, so \b works).
    return "{job=\"systemd-journal\", unit=\"slurmd.service\", node=" + logql_string(node) + "} |~ " +
           logql_string("\\b" + job_id + "\\b");
}

std::string fabric_manager_query(const std::string& node) {
    return "{job=\"fabric-manager\", node=" + logql_string(node) + "}";
}

std::string xid_query(const std::vector<std::string>& nodes) {
    return "{job=\"kmsg\"" + (nodes.empty() ? std::string() : ", " + node_matcher(nodes)) + "} |~ \"^NVRM: Xid|^nvidia-nvswitch[0-9]*: SXid\"";
}

std::vector<NamedQuery> job_queries(const std::string& job_id, const std::vector<std::string>& nodes,
                                    bool structured_metadata) {
    std::vector<NamedQuery> q;
    q.push_back({"prolog and epilog", prolog_epilog_query(job_id)});
    q.push_back({"NCCL warnings", nccl_query(job_id) + " |= \"NCCL WARN\""});
    q.push_back({"NCCL, all lines", nccl_query(job_id)});
    if (!nodes.empty()) {
        const std::string nm = node_matcher(nodes);
        q.push_back({"kernel log of the job's nodes", "{job=\"kmsg\", " + nm + "}"});
        q.push_back({"Xid and SXid on the job's nodes", "{job=\"kmsg\", " + nm + "} |~ \"^NVRM: Xid|^nvidia-nvswitch[0-9]*: SXid\""});
        q.push_back({"slurmd about this job", "{job=\"systemd-journal\", unit=\"slurmd.service\", " + nm + "} |~ " +
                                                  logql_string("\\b" + job_id + "\\b")});
        q.push_back({"fabric manager on the job's nodes", "{job=\"fabric-manager\", " + nm + "}"});
        q.push_back(
            {"Xid count by node", "sum by (node) (count_over_time({job=\"kmsg\", " + nm + "} |~ \"^NVRM: Xid\" [5m]))"});
    }
    if (structured_metadata)
        q.push_back({"kernel records while the job ran (structured metadata)",
                     "{job=\"kmsg\"} | slurm_job_id=~" + logql_string("(.*,)?" + job_id + "(,.*)?")});
    return q;
}

}  // namespace jobtrail::forensics
