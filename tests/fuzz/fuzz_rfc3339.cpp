// Timestamps as NCCL lines and job logs carry them (hostile bytes): parse_rfc3339_ns must refuse
// what does not fit, never overflow, and what it accepts must come back from its own format.
// The input's lines also go through one Rfc3339Parser, whose remembered second must never
// change an answer.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/time.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    if (const auto ns = jobtrail::parse_rfc3339_ns(in)) {
        if (jobtrail::parse_rfc3339_ns(jobtrail::format_rfc3339_ns(*ns)) != ns) __builtin_trap();
    }
    jobtrail::Rfc3339Parser parser;
    for (std::string_view rest = in; !rest.empty();) {
        const size_t nl = rest.find('\n');
        const std::string_view line = rest.substr(0, nl);
        if (parser.parse(line) != jobtrail::parse_rfc3339_ns(line)) __builtin_trap();
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    }
    return 0;
}
