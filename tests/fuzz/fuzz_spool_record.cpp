// Spool files are read back after crashes and disk errors: decoding must take any bytes.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "spool/record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    jobtrail::spool::Record r;
    size_t used = 0;
    while (!in.empty()) {
        const auto st = jobtrail::spool::decode_frame(in, r, &used);
        if (st != jobtrail::spool::DecodeStatus::kOk) break;
        std::string again;
        jobtrail::spool::append_frame(again, r);  // what decodes re-encodes to the same frame
        if (again != in.substr(0, used)) __builtin_trap();
        in.remove_prefix(used);
    }
    return 0;
}
