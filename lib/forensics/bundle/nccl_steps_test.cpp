#include "forensics/bundle/nccl_steps.hpp"

#include <catch2/catch.hpp>
#include <string>

#include "node/nccl_file.hpp"

using jobtrail::forensics::bundle::NcclSteps;

TEST_CASE("bundle: a node's first 65536 step changes are kept, later ones are not believed", "[bundle][hostile]") {
    // One process whose lines (anyone who can push writes them) say step 0, 1, 0, 1, ... a
    // second apart: each a change.
    NcclSteps steps;
    const std::string file = jobtrail::node::nccl_file_name("0", "gpu01", "4242");
    const auto say = [&](size_t i) {
        jobtrail::loki::QueryEntry e;
        e.ts_ns = static_cast<int64_t>(i) * 1'000'000'000;
        steps.add(e, std::to_string(i % 2), file);
    };
    for (size_t i = 0; i <= NcclSteps::kMax; ++i) say(i);
    steps.done();
    const auto at = [](size_t i) { return static_cast<int64_t>(i) * 1'000'000'000; };
    CHECK(steps.step_of("gpu01", "4242", at(0)) == "0");
    CHECK(steps.step_of("gpu01", "4242", at(NcclSteps::kMax - 1)) == "1");  // the 65536th change
    CHECK(steps.step_of("gpu01", "4242", at(NcclSteps::kMax)) == "1");      // the 65537th: not kept
}
