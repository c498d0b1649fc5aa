// Container log files (kubelet's /var/log/pods) as the pods and file sources read them: each
// line parsed, and fed to the P/F joiner, whose bound and losslessness are checked.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shipper/sources/file/cri.hpp"

namespace cri = jobtrail::shipper::cri;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view in(reinterpret_cast<const char*>(data), size);
    constexpr size_t kMax = 64;
    cri::Joiner j(kMax);
    std::vector<cri::Joiner::Joined> out;
    std::string fed, handed;
    uint64_t offset = 0;
    while (!in.empty()) {
        const size_t nl = in.find('\n');
        const std::string_view line = in.substr(0, nl);
        if (const auto l = cri::parse(line)) {
            // What parses is a part of the line: the message ends it.
            if (l->message.size() > line.size() || line.substr(line.size() - l->message.size()) != l->message)
                __builtin_trap();
            if (l->stream != "stdout" && l->stream != "stderr") __builtin_trap();
            fed += l->message;
            j.feed(*l, offset, out);
            if (j.held_bytes() > 2 * kMax) __builtin_trap();  // at most kMax per stream
            if (j.holding() && j.resume_offset(offset + line.size() + 1) > offset) __builtin_trap();
        }
        offset += line.size() + 1;
        if (nl == std::string_view::npos) break;
        in.remove_prefix(nl + 1);
    }
    j.take_all(out);
    // Every byte of every message handed out, none twice (the streams' interleaving may differ,
    // so the sizes are compared); only a single piece longer than the bound is longer than it.
    for (const auto& o : out) {
        if (o.text.size() > kMax && o.text.size() > size) __builtin_trap();
        handed += o.text;
    }
    if (handed.size() != fed.size()) __builtin_trap();
    return 0;
}
