// Any bytes a read() of /dev/kmsg could return: parsing must not crash, and a parsed record
// must format back to one line.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kmsg/merge.hpp"
#include "kmsg/record.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view raw(reinterpret_cast<const char*>(data), size);
    jobtrail::kmsg::Record r;
    jobtrail::kmsg::ParseError e;
    uint64_t seq = 0, usec = 0;
    jobtrail::kmsg::parse_header(raw, seq, usec);
    if (jobtrail::kmsg::parse_record(raw, r, e)) {
        const auto line = jobtrail::kmsg::format_header_line(r);
        if (line.find('\n') != std::string::npos) __builtin_trap();
        jobtrail::kmsg::FragmentMerger m;
        std::vector<jobtrail::kmsg::Record> out;
        m.push(r, out);
        m.push(r, out);
        m.flush(out);
    }
    return 0;
}
