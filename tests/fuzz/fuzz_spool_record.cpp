// Spool files are read back after crashes and disk errors: decoding must take any bytes, and
// what decodes re-encodes to the same frame (one record, or a run of one stream's records); a
// compressed run (whose snappy bytes need not be the ones snappy would write) to the same records.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "spool/record.hpp"
#include "spool_frames.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    std::vector<jobtrail::spool::Record> records;
    size_t used = 0;
    int version = 0;
    while (!in.empty()) {
        const auto st = jobtrail::spool::decode_frame(in, records, &used, nullptr, &version);
        if (st != jobtrail::spool::DecodeStatus::kOk) break;
        if (records.empty()) __builtin_trap();
        std::string again;
        if (version == 1) {
            if (records.size() != 1) __builtin_trap();
            jobtrail::spool::append_frame(again, records.front());
        } else {
            for (const auto& r : records)
                if (r.stream != records.front().stream) __builtin_trap();
            if (version == 3) {
                jobtrail::spool::append_compressed_run(again, records);
                std::vector<jobtrail::spool::Record> back;
                size_t used_again = 0;
                if (jobtrail::spool::decode_frame(again, back, &used_again) != jobtrail::spool::DecodeStatus::kOk ||
                    used_again != again.size() || back != records)
                    __builtin_trap();
                in.remove_prefix(used);
                continue;
            }
            jobtrail::spool::append_run(again, records);
        }
        if (again != in.substr(0, used)) __builtin_trap();
        in.remove_prefix(used);
    }
    return 0;
}
