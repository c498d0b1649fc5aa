// query_range answers come over the network: the parser must take any body and say no cleanly.
#include <cstddef>
#include <cstdint>
#include <string>

#include "loki/query_response.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::vector<jobtrail::loki::LabelSet> streams;
    std::vector<std::pair<size_t, jobtrail::loki::QueryEntry>> entries;
    const auto st = jobtrail::loki::parse_streams_response(std::string(reinterpret_cast<const char*>(data), size),
                                                           streams, entries);
    if (!st.ok && st.error.empty()) __builtin_trap();
    for (const auto& [idx, e] : entries)
        if (idx >= streams.size()) __builtin_trap();
    return 0;
}
