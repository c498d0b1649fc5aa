#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loki/query.hpp"

namespace jobtrail::forensics::bundle {

// Which step each NCCL process (host:pid) of a node was, from the lines that say it: the first
// line of each file the shipper sent, and one every ten minutes after. A pid used again by a
// later step is that step's from its own first line on; a line stamped before any of them is
// the earliest's. Anyone who can push to Loki writes these: steps that could not name a file
// are ignored, and the count is bounded.
class NcclSteps {
public:
    static constexpr size_t kMax = 65536;  // (process, step) changes kept for one node
    static constexpr const char* kUnknown = "unknown";
    static constexpr int64_t kSaidEveryNs = 600'000'000'000;  // the shipper's Origin::kSayAgainNs

    static bool usable(const std::string& step);
    void add(const loki::QueryEntry& e, const std::string& step, const std::string& file);
    // Once every line that says a step is in.
    void done();
    std::string step_of(std::string_view host, std::string_view pid, int64_t ts) const;

private:
    static bool by_time(const std::pair<int64_t, std::string>& a, const std::pair<int64_t, std::string>& b) {
        return a.first < b.first;
    }
    std::map<std::string, std::vector<std::pair<int64_t, std::string>>, std::less<>> by_process_;
    size_t kept_ = 0;
};

}  // namespace jobtrail::forensics::bundle
