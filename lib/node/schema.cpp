#include "node/schema.hpp"

namespace jobtrail::node {
namespace {

constexpr std::array<std::string_view, kStreamKinds> kNames = {"kernel",         "job-log",          "nccl", "journal",
                                                               "fabric-manager", "jobtrail-shipper", "pod",  "other"};

}  // namespace

std::string_view stream_kind_name(Stream s) {
    return kNames[static_cast<size_t>(s)];
}

std::optional<Stream> parse_stream_kind(std::string_view s) {
    for (size_t i = 0; i < kNames.size(); ++i)
        if (kNames[i] == s) return static_cast<Stream>(i);
    return std::nullopt;
}

const Schema& Schema::defaults() {
    static const Schema s;
    return s;
}

Schema::Schema() {
    set_job(Stream::kKernel, "kmsg");
    set_job(Stream::kJobLog, "slurm-prolog-epilog");
    set_job(Stream::kNccl, "nccl");
    set_job(Stream::kJournal, "systemd-journal");
    set_job(Stream::kFabricManager, "fabric-manager");
    set_job(Stream::kShipper, "jobtrail-shipper");
    set_job(Stream::kPod, "kubernetes-pods");
}

}  // namespace jobtrail::node
