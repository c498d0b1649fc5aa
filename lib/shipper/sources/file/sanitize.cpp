#include "shipper/sources/file/sanitize.hpp"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "common/text.hpp"

namespace jobtrail::shipper {

void sanitize_line(std::string_view s, std::string& out) {
    // Fast path, the common case: plain ASCII without NUL is taken as it is. A byte with its top
    // bit set, or zero, shows in the top bit of (b | (b - 1)): with SSE2, sixteen bytes at a time
    // checked as they are copied; eight at a time, then copied, otherwise.
#if defined(__SSE2__)
    if (s.size() >= 16) {
        out.resize(s.size());
        const __m128i one = _mm_set1_epi8(1);
        __m128i acc = _mm_setzero_si128();
        const auto take = [&](size_t at) {
            const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s.data() + at));
            _mm_storeu_si128(reinterpret_cast<__m128i*>(out.data() + at), v);
            acc = _mm_or_si128(acc, _mm_or_si128(v, _mm_sub_epi8(v, one)));
        };
        size_t i = 0;
        for (; i + 16 <= s.size(); i += 16) take(i);
        if (i < s.size()) take(s.size() - 16);  // the tail, overlapping what was seen
        if (_mm_movemask_epi8(acc) == 0) return;
    } else
#endif
    {
        constexpr uint64_t kLow = 0x0101010101010101ULL, kHigh = 0x8080808080808080ULL;
        uint64_t bad = 0;
        size_t i = 0;
        for (; i + 8 <= s.size(); i += 8) {
            uint64_t w;
            std::memcpy(&w, s.data() + i, 8);
            bad |= (w | (w - kLow)) & kHigh;
        }
        for (; i < s.size(); ++i) bad |= static_cast<unsigned char>(s[i]) - 1u >= 0x7fu;
        if (bad == 0) {
            out.assign(s);
            return;
        }
    }
    out.clear();
    out.reserve(s.size());
    size_t i = 0;
    while (i < s.size()) {
        const auto c = static_cast<unsigned char>(s[i]);
        if (c == 0) {
            out += "\\x00";
            ++i;
        } else if (c < 0x80) {
            out += static_cast<char>(c);
            ++i;
        } else {
            // Reuse escape_line's UTF-8 validation: a valid sequence comes back unchanged.
            size_t n = (c >= 0xf0) ? 4 : (c >= 0xe0) ? 3 : (c >= 0xc2) ? 2 : 1;
            const std::string_view seq = s.substr(i, std::min(n, s.size() - i));
            if (n > 1 && seq.size() == n && escape_line(seq) == seq) {
                out.append(seq);
                i += n;
            } else {
                out += "\xef\xbf\xbd";  // U+FFFD
                ++i;
            }
        }
    }
}

std::string sanitize_line(std::string_view s) {
    std::string out;
    sanitize_line(s, out);
    return out;
}

}  // namespace jobtrail::shipper
