#include "shipper/sources/file/labels.hpp"

#include <catch2/catch.hpp>

#include "node/layout.hpp"

using namespace jobtrail::shipper;
using jobtrail::node::StreamKind;

TEST_CASE("the node contract's labeler: job logs give job and phase, NCCL files job and step", "[file]") {
    const jobtrail::node::Layout layout;
    const auto joblog = contract_labeler(LineFormat::kJoblog, StreamKind::kJobLog);
    const auto r = joblog(layout.job_log(jobtrail::node::Phase::kEpilog, "4242"));
    REQUIRE(r.ok);
    CHECK(r.value.job_id == "4242");
    CHECK(r.value.phase == "epilog");
    CHECK(r.value.kind == StreamKind::kJobLog);
    CHECK(r.value.metadata == Metadata{{"phase", "epilog"}});
    CHECK(r.value.labels.empty());

    const auto nccl = contract_labeler(LineFormat::kNccl, StreamKind::kNccl);
    const auto ours = nccl(layout.nccl_job_dir("77") + "/0.gpu01.1234.log");
    REQUIRE(ours.ok);
    CHECK(ours.value.job_id == "77");
    CHECK(ours.value.step == "0");
    CHECK(ours.value.slurm_job);  // its lines may draw from the job's user's NCCL budget
    // The step once per file; a line that says host:pid needs no more to name its file.
    CHECK(ours.value.first_line_metadata == Metadata{{"step", "0"}});
    CHECK(ours.value.nccl_prefix == "gpu01:1234:");
    CHECK(ours.value.metadata.empty());
    // A name that is not one of ours: every line carries it.
    const auto mine = nccl(layout.nccl_job_dir("77") + "/mine.log");
    REQUIRE(mine.ok);
    CHECK(mine.value.job_id.empty());
    CHECK_FALSE(mine.value.slurm_job);
    CHECK(mine.value.nccl_prefix.empty());
    CHECK(mine.value.metadata == Metadata{{"file", "mine.log"}});

    // Any other file is only its kind: refused by nothing.
    const auto plain = contract_labeler(LineFormat::kPlain, StreamKind::kFabricManager)("/var/log/fabricmanager.log");
    REQUIRE(plain.ok);
    CHECK(plain.value.kind == StreamKind::kFabricManager);
    CHECK(plain.value.job_id.empty());
    CHECK(plain.value.metadata.empty());
}
