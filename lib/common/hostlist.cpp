#include "common/hostlist.hpp"

#include <cstdint>

namespace jobtrail {

namespace {

constexpr size_t kMaxName = 255;  // a DNS name's limit; Slurm's node names are shorter still

bool host_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
}
bool digit(char c) {
    return c >= '0' && c <= '9';
}

// One bracket group's numbers, each already padded: "01-03,7" -> {"01","02","03","7"}.
Result<std::vector<std::string>> expand_ranges(std::string_view whole, size_t at, std::string_view in, size_t budget) {
    std::vector<std::string> out;
    size_t i = 0;
    auto fail = [&](const std::string& what) {
        return Status::failure("hostlist \"" + std::string(whole.substr(0, 200)) + "\": " + what + " at byte " +
                               std::to_string(at + i));
    };
    auto number = [&](std::string& digits) -> bool {
        const size_t s = i;
        while (i < in.size() && digit(in[i])) ++i;
        digits.assign(in.substr(s, i - s));
        return !digits.empty() && digits.size() <= 9;  // fits int64 arithmetic with room
    };
    while (true) {
        std::string lo, hi;
        if (!number(lo))
            return fail(lo.size() > 9 ? "a range number longer than 9 digits" : "a range without a number");
        hi = lo;
        if (i < in.size() && in[i] == '-') {
            ++i;
            if (!number(hi))
                return fail(hi.size() > 9 ? "a range number longer than 9 digits" : "a range without its end");
        }
        const int64_t a = std::stoll(lo), b = std::stoll(hi);
        if (b < a) return fail("a range that ends before it starts (" + lo + "-" + hi + ")");
        if (static_cast<uint64_t>(b - a) + 1 + out.size() > budget)
            return fail("more than " + std::to_string(budget) + " hosts");
        for (int64_t n = a; n <= b; ++n) {
            std::string s = std::to_string(n);
            if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
            out.push_back(std::move(s));
        }
        if (i == in.size()) return out;
        if (in[i] != ',')
            return fail(std::string("'") + (host_char(in[i]) ? std::string(1, in[i]) : "?") + "' in a range");
        ++i;
    }
}

}  // namespace

Result<std::vector<std::string>> expand_hostlist(std::string_view list, size_t max_hosts) {
    std::vector<std::string> hosts;
    size_t i = 0;
    auto fail = [&](const std::string& what, size_t at) {
        return Status::failure("hostlist \"" + std::string(list.substr(0, 200)) + "\": " + what + " at byte " +
                               std::to_string(at));
    };
    if (list.empty()) return Status::failure("hostlist is empty");
    while (i <= list.size()) {
        // One name: literal text and bracket groups; its expansions multiply.
        const size_t start = i;
        std::vector<std::string> names{""};
        while (i < list.size() && list[i] != ',') {
            if (list[i] == '[') {
                const size_t close = list.find(']', i);
                if (close == std::string_view::npos) return fail("'[' without ']'", i);
                auto nums = expand_ranges(list, i + 1, list.substr(i + 1, close - i - 1), max_hosts);
                if (!nums.ok) return Status(nums);
                if (names.size() * nums.value.size() + hosts.size() > max_hosts)
                    return fail("more than " + std::to_string(max_hosts) + " hosts", i);
                std::vector<std::string> next;
                next.reserve(names.size() * nums.value.size());
                for (const auto& n : names)
                    for (const auto& x : nums.value) next.push_back(n + x);
                names = std::move(next);
                i = close + 1;
            } else if (list[i] == ']') {
                return fail("']' without '['", i);
            } else if (!host_char(list[i])) {
                return fail("a byte that is not a host name character", i);
            } else {
                const size_t s = i;
                while (i < list.size() && host_char(list[i])) ++i;
                for (auto& n : names) n.append(list.substr(s, i - s));
            }
            for (const auto& n : names)
                if (n.size() > kMaxName) return fail("a host name over 255 bytes", i);
        }
        if (i == start) return fail("an empty host name", i);
        if (hosts.size() + names.size() > max_hosts)
            return fail("more than " + std::to_string(max_hosts) + " hosts", i);
        for (auto& n : names) hosts.push_back(std::move(n));
        if (i == list.size()) break;
        ++i;  // the ','
        if (i == list.size()) return fail("an empty host name", i);
    }
    return hosts;
}

}  // namespace jobtrail
