#include "node/schema.hpp"

namespace jobtrail::node {
namespace {

constexpr std::array<std::string_view, kStreamKinds> kNames = {
    "kernel", "job-log", "nccl", "journal", "fabric-manager", "jobtrail-shipper", "pod", "dcgm", "other"};

}  // namespace

std::string_view stream_kind_name(StreamKind s) {
    return kNames[static_cast<size_t>(s)];
}

std::optional<StreamKind> parse_stream_kind(std::string_view s) {
    for (size_t i = 0; i < kNames.size(); ++i)
        if (kNames[i] == s) return static_cast<StreamKind>(i);
    return std::nullopt;
}

const Schema& Schema::defaults() {
    static const Schema s;
    return s;
}

Schema::Schema() {
    set_job(StreamKind::kKernel, "kmsg");
    set_job(StreamKind::kJobLog, "slurm-prolog-epilog");
    set_job(StreamKind::kNccl, "nccl");
    set_job(StreamKind::kJournal, "systemd-journal");
    set_job(StreamKind::kFabricManager, "fabric-manager");
    set_job(StreamKind::kShipper, "jobtrail-shipper");
    set_job(StreamKind::kPod, "kubernetes-pods");
    set_job(StreamKind::kDcgm, "dcgm");
}

}  // namespace jobtrail::node
