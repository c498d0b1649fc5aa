// Job log lines as the shipper and `jobtrail bundle` will read them from disk.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "joblog/format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    jobtrail::joblog::Line l;
    if (jobtrail::joblog::parse_line(in, l)) {
        // What parses must survive a write/parse round trip with the same tag.
        std::string out;
        jobtrail::joblog::append_line(out, l.ts_ns, l.tag, l.name, l.text);
        jobtrail::joblog::Line again;
        if (!jobtrail::joblog::parse_line(std::string_view(out).substr(0, out.size() - 1), again)) __builtin_trap();
        if (again.tag != l.tag || again.ts_ns != l.ts_ns) __builtin_trap();
    }
    return 0;
}
