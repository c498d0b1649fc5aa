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

// Structured-metadata keys (Loki 3): per line, not part of the stream. The shipper writes them,
// the bundle, `jobtrail node`'s queries and analysis read them back.
namespace metadata {
// Job logs (sources/file): the file's phase, and a job-log line's tag.
inline constexpr const char* kPhase = "phase";
inline constexpr const char* kTag = "tag";
// NCCL files: the step, on a file's first line shipped; the file's name, on a line that does not
// say its host:pid.
inline constexpr const char* kStep = "step";
inline constexpr const char* kFile = "file";
// A CRI line's stream (stdout, stderr); a journal entry's pid; a pod's uid.
inline constexpr const char* kStream = "stream";
inline constexpr const char* kPid = "pid";
inline constexpr const char* kPodUid = "pod_uid";
// Kernel records (sources/kmsg): the record's sequence number and dictionary, the event
// recognised in it.
inline constexpr const char* kSeq = "seq";
inline constexpr const char* kSubsystem = "subsystem";
inline constexpr const char* kDevice = "device";
inline constexpr const char* kXid = "xid";
inline constexpr const char* kSxid = "sxid";
inline constexpr const char* kPciBdf = "pci_bdf";
inline constexpr const char* kEvent = "event";
inline constexpr const char* kSeverity = "severity";
// The job a kernel record concerns (stages, devices/attribution.hpp), the jobs running then, how
// that was decided (device, memcg, node) and the GPU's index.
inline constexpr const char* kSlurmJobId = "slurm_job_id";
inline constexpr const char* kSlurmJobsRunning = "slurm_jobs_running";
inline constexpr const char* kAttribution = "attribution";
inline constexpr const char* kGpu = "gpu";
}  // namespace metadata

// kDcgm: DCGM's policy violations and health incidents (sources/dcgm, dcgm/event.hpp).
enum class StreamKind { kKernel, kJobLog, kNccl, kJournal, kFabricManager, kShipper, kPod, kDcgm, kOther };
inline constexpr size_t kStreamKinds = 9;

// The names of the kinds in the config (`stream:` of a file source).
std::string_view stream_kind_name(StreamKind s);
std::optional<StreamKind> parse_stream_kind(std::string_view s);

class Schema {
public:
    Schema();  // the defaults: kmsg, slurm-prolog-epilog, nccl, systemd-journal, fabric-manager,
               // jobtrail-shipper, kubernetes-pods, dcgm
    // The defaults, for the streams whose `job` the site cannot rename (kernel, journal, shipper).
    static const Schema& defaults();
    void set_job(StreamKind s, std::string job) { jobs_[static_cast<size_t>(s)] = std::move(job); }
    const std::string& job(StreamKind s) const { return jobs_[static_cast<size_t>(s)]; }

private:
    std::array<std::string, kStreamKinds> jobs_;
};

}  // namespace jobtrail::node
