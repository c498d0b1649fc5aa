#include "dcgm/convert.hpp"

#include <catch2/catch.hpp>
#include <cstring>
#include <memory>

#include "dcgm/api.hpp"

using namespace jobtrail;
namespace api = dcgm::api;

namespace {

api::PolicyCallbackResponseV2 xid_response(unsigned gpu, unsigned xid) {
    api::PolicyCallbackResponseV2 r{};
    r.version = api::kPolicyCallbackResponseVersion2;
    r.condition = api::kCondXid;
    r.val.xid = {1700000000000000, xid};
    r.gpuId = gpu;
    return r;
}

}  // namespace

TEST_CASE("a DCGM callback response of either major becomes its event", "[dcgm-client]") {
    std::string error;
    auto r4 = xid_response(5, 79);
    auto e = dcgm::convert_violation(&r4, sizeof r4, 4, 0, error);
    REQUIRE(e);
    CHECK(dcgm::format_line(*e) == "XID 79 on GPU 5");
    CHECK(e->ts_us == 1700000000000000);

    // 3.x: the response does not name the GPU; the registration's group does.
    api::PolicyCallbackResponseV1 r3{};
    r3.version = api::kPolicyCallbackResponseVersion1;
    r3.condition = api::kCondDbe;
    r3.val.dbe = {1, 4, 2};
    e = dcgm::convert_violation(&r3, sizeof r3, 3, 2, error);
    REQUIRE(e);
    CHECK(dcgm::format_line(*e) == "Double-bit ECC error on GPU 2: 2 errors in texture");
    r3.val.dbe.location = 9;
    CHECK(dcgm::convert_violation(&r3, sizeof r3, 3, 2, error)->detail == "location_9");
}

TEST_CASE("a DCGM callback response that is not one known condition of the right version is refused", "[dcgm-client]") {
    std::string error;
    auto r = xid_response(0, 79);
    r.condition = 0x80;
    CHECK_FALSE(dcgm::convert_violation(&r, sizeof r, 4, 0, error));
    CHECK(error == "policy callback: condition 0x80 is not one known condition bit");
    r.condition = api::kCondXid | api::kCondDbe;
    CHECK_FALSE(dcgm::convert_violation(&r, sizeof r, 4, 0, error));
    CHECK(error == "policy callback: condition 0x41 is not one known condition bit");
    r.condition = api::kCondXid;
    r.version = api::kPolicyCallbackResponseVersion1;
    CHECK_FALSE(dcgm::convert_violation(&r, sizeof r, 4, 0, error));
    CHECK(error == "policy callback: version 0x1000018, expected 0x2000020");
    CHECK_FALSE(dcgm::convert_violation(&r, sizeof r - 1, 4, 0, error));
    CHECK(error == "policy callback: 31 bytes, expected 32");
    CHECK_FALSE(dcgm::convert_violation(nullptr, 0, 3, 0, error));
}

TEST_CASE("a DCGM health response is read within its array and its strings", "[dcgm-client]") {
    std::string error;
    auto r = std::make_unique<api::HealthResponseV4>();
    r->version = api::kHealthResponseVersion4;
    r->incidentCount = 3;
    auto& a = r->incidents[0];
    a.system = 0x2;
    a.health = api::kHealthResultFail;
    a.error.code = 14;
    std::memset(a.error.msg, 'x', sizeof a.error.msg);  // not terminated
    a.entityInfo = {api::kEntityGpu, 7};
    auto& b = r->incidents[1];  // an NvSwitch's: not a GPU event
    b.system = 0x800;
    b.health = api::kHealthResultFail;
    b.entityInfo = {3, 0};
    auto& c = r->incidents[2];
    c.system = 0x3;  // two systems
    c.health = 15;
    c.error.code = 4000;
    c.entityInfo = {api::kEntityGpu, 1};
    auto incidents = dcgm::convert_health(r.get(), sizeof *r, 3, error);
    REQUIRE(incidents);
    REQUIRE(incidents->size() == 2);
    CHECK((*incidents)[0].gpu == 7);
    CHECK((*incidents)[0].code == "DCGM_FR_NVLINK_DOWN");
    CHECK((*incidents)[0].system == "nvlink");
    CHECK((*incidents)[0].health == "fail");
    CHECK((*incidents)[0].message == std::string(1024, 'x'));
    CHECK((*incidents)[1].code == "DCGM_FR_4000");
    CHECK((*incidents)[1].system == "system_0x3");
    CHECK((*incidents)[1].health == "health_15");

    // DCGM files an incident from an Xid (79: fallen off the bus) under every system at once.
    c.system = api::kHealthWatchAll;
    CHECK(dcgm::convert_health(r.get(), sizeof *r, 3, error)->at(1).system == "all");

    r->incidentCount = 1000;  // more than the 64 a v4 response holds
    error.clear();
    incidents = dcgm::convert_health(r.get(), sizeof *r, 3, error);
    REQUIRE(incidents);
    CHECK(incidents->size() == 2);
    CHECK(error == "health response: 1000 incidents, at most 64 fit");

    CHECK_FALSE(dcgm::convert_health(r.get(), sizeof *r, 4, error));
    CHECK(error == "health response: 66828 bytes, expected 1069068");
}
