// Timestamps as NCCL lines and job logs carry them (hostile bytes): parse_rfc3339_ns must refuse
// what does not fit, never overflow, and what it accepts must come back from its own format.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/time.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (const auto ns = jobtrail::parse_rfc3339_ns(in)) {
        if (jobtrail::parse_rfc3339_ns(jobtrail::format_rfc3339_ns(*ns)) != ns) __builtin_trap();
    }
    return 0;
}
