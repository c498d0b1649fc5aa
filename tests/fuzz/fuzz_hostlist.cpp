// SLURM_JOB_NODELIST as the bundle reads it back from Loki (anyone who can push can write it):
// expand_hostlist must stay within its bounds whatever the bytes, and what it accepts is names.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/hostlist.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const auto r = jobtrail::expand_hostlist(in, 4096);
    if (!r.ok) return 0;
    if (r.value.empty() || r.value.size() > 4096) __builtin_trap();
    for (const auto& n : r.value)
        if (n.empty() || n.size() > 255 || n.find_first_of("[],") != std::string::npos) __builtin_trap();
    return 0;
}
