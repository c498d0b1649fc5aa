#include "kmsg/boot_clock.hpp"

#include <charconv>

#include "common/fs.hpp"
#include "common/text.hpp"
#include "common/time.hpp"

namespace jobtrail::kmsg {
namespace {

// "<boot_id> <offset_ns>\n"
bool parse_offset_file(const std::string& content, std::string& boot_id, int64_t& offset) {
    const std::string_view s = trim(content);
    const size_t sp = s.find(' ');
    if (sp == std::string_view::npos) return false;
    boot_id = std::string(s.substr(0, sp));
    const std::string_view num = s.substr(sp + 1);
    auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), offset);
    return ec == std::errc() && p == num.data() + num.size() && !boot_id.empty();
}

int64_t derive_offset() {
    // Take the tightest of a few samples: the offset is realtime - monotonic at one instant.
    int64_t best = 0;
    int64_t best_gap = INT64_MAX;
    for (int i = 0; i < 3; ++i) {
        const int64_t m0 = monotonic_ns();
        const int64_t r = realtime_ns();
        const int64_t m1 = monotonic_ns();
        if (m1 - m0 < best_gap) {
            best_gap = m1 - m0;
            best = r - (m0 + (m1 - m0) / 2);
        }
    }
    // Whole microseconds: kernel timestamps have no finer resolution to match.
    return best - best % 1000;
}

}  // namespace

std::string BootClock::current_boot_id() {
    auto s = read_small_file("/proc/sys/kernel/random/boot_id", 128);
    return s ? std::string(trim(*s)) : std::string("unknown-boot");
}

Status BootClock::load(const std::string& state_dir) {
    boot_id_ = current_boot_id();
    const std::string path = state_dir + "/boot-offset";
    for (int attempt = 0; attempt < 2; ++attempt) {
        if (auto content = read_small_file(path, 4096)) {
            std::string id;
            int64_t off = 0;
            if (parse_offset_file(*content, id, off) && id == boot_id_) {
                offset_ns_ = off;
                return {};
            }
            // Another boot's (or a corrupt) file: replace it.
            offset_ns_ = derive_offset();
            const std::string body = boot_id_ + " " + std::to_string(offset_ns_) + "\n";
            if (auto st = write_file_atomic(path, body, 0644); !st.ok) return st;
            continue;  // re-read: a concurrent writer may have won the rename race
        }
        if (auto st = make_dirs(state_dir, 0755); !st.ok) {
            offset_ns_ = derive_offset();
            return st;
        }
        offset_ns_ = derive_offset();
        bool created = false;
        const std::string body = boot_id_ + " " + std::to_string(offset_ns_) + "\n";
        if (auto st = create_file_exclusive(path, body, 0644, &created); !st.ok) return st;
        if (created) return {};
    }
    return {};
}

}  // namespace jobtrail::kmsg
