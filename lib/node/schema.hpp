#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

// The stream schema (design.md, Labels): label names, and the `job` value of each kind of stream
// with the operator's overrides resolved once. Stages and LogQL builders ask it for "the NCCL
// stream" instead of comparing label strings, so renaming `job: nccl` in the config renames it
// everywhere.
namespace jobtrail::node {

namespace label {
inline constexpr const char* kCluster = "cluster";
inline constexpr const char* kNode = "node";
inline constexpr const char* kJob = "job";
inline constexpr const char* kJobId = "job_id";
inline constexpr const char* kUnit = "unit";
inline constexpr const char* kPriority = "priority";
inline constexpr const char* kServiceName = "service_name";
// Kubernetes pod logs (sources/pods/): from kubelet's path, never the pod uid (metadata).
inline constexpr const char* kNamespace = "namespace";
inline constexpr const char* kPod = "pod";
inline constexpr const char* kContainer = "container";
}  // namespace label

enum class Stream { kKernel, kJobLog, kNccl, kJournal, kFabricManager, kShipper, kPod, kOther };
inline constexpr size_t kStreamKinds = 8;

// The names of the kinds in the config (`stream:` of a file source).
std::string_view stream_kind_name(Stream s);
std::optional<Stream> parse_stream_kind(std::string_view s);

class Schema {
public:
    Schema();  // the defaults: kmsg, slurm-prolog-epilog, nccl, systemd-journal, fabric-manager,
               // jobtrail-shipper, kubernetes-pods
    // The defaults, for the streams whose `job` the site cannot rename (kernel, journal, shipper).
    static const Schema& defaults();
    void set_job(Stream s, std::string job) { jobs_[static_cast<size_t>(s)] = std::move(job); }
    const std::string& job(Stream s) const { return jobs_[static_cast<size_t>(s)]; }

private:
    std::array<std::string, kStreamKinds> jobs_;
};

}  // namespace jobtrail::node
