// DCGM's callback and health responses, as raw bytes from the library: the conversion must not
// crash, read past the struct, or make an event whose line does not parse back. The first byte
// picks the struct (callback or health response, 3.x or 4.x) and whether its version field is
// made right (so that the fuzzer reaches the fields); the rest fills the struct from its start.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "dcgm/api.hpp"
#include "dcgm/convert.hpp"

namespace api = jobtrail::dcgm::api;
using namespace jobtrail::dcgm;

namespace {

void check_line(const Event& e) {
    const auto back = parse_line(format_line(e));
    if (!back || back->kind != e.kind || back->gpu != e.gpu) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const uint8_t pick = data[0];
    const int major = (pick & 1) ? 4 : 3;
    const bool health = pick & 2, fix_version = pick & 4;
    const size_t want =
        health ? (major == 4 ? sizeof(api::HealthResponseV5) : sizeof(api::HealthResponseV4))
               : (major == 4 ? sizeof(api::PolicyCallbackResponseV2) : sizeof(api::PolicyCallbackResponseV1));
    // A wrong size now and then (the top bit), to check that it is refused.
    const size_t len = (pick & 0x80) ? std::min(want, size - 1) : want;
    std::vector<unsigned char> bytes(want);
    std::memcpy(bytes.data(), data + 1, std::min(want, size - 1));
    if (fix_version) {
        const unsigned v =
            health ? (major == 4 ? api::kHealthResponseVersion5 : api::kHealthResponseVersion4)
                   : (major == 4 ? api::kPolicyCallbackResponseVersion2 : api::kPolicyCallbackResponseVersion1);
        std::memcpy(bytes.data(), &v, sizeof v);
    }
    std::string error;
    if (health) {
        if (const auto incidents = convert_health(bytes.data(), len, major, error)) {
            for (const auto& i : *incidents) {
                Event e;
                e.kind = Kind::kHealth;
                e.gpu = i.gpu;
                e.code = i.code;
                e.system = i.system;
                e.health = i.health;
                e.message = i.message;
                check_line(e);
            }
        } else if (error.empty()) {
            __builtin_trap();  // a refusal always says why
        }
    } else if (const auto e = convert_violation(bytes.data(), len, major, pick >> 3, error)) {
        check_line(*e);
    } else if (error.empty()) {
        __builtin_trap();
    }
    return 0;
}
