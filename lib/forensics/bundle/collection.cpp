#include "forensics/bundle/collection.hpp"

#include <algorithm>
#include <cstdio>

#include "common/text.hpp"
#include "joblog/format.hpp"
#include "joblog/kernel_line.hpp"
#include "joblog/shipped.hpp"

namespace jobtrail::forensics::bundle {

bool Gathered::any_failed() const {
    return std::any_of(queries.begin(), queries.end(), [](const QueryRecord& q) { return q.failed; });
}

void Collection::record(const std::string& node, const std::string& source, const std::string& rel, int64_t ts,
                        std::string_view raw, int when) {
    // One record, one line: a newline from Loki must not forge a record of its own.
    const std::string line = escape_line(raw);
    st_.write(rel, ts, line);
    std::lock_guard<std::mutex> lk(an_mu_);
    an_.add(node, source, ts, line, when);
}

void Collection::record_dcgm(const std::string& node, const std::string& rel, int64_t ts, std::string_view raw,
                             const loki::LabelSet* labels) {
    const std::string line = escape_line(raw);
    st_.write(rel, ts, line);
    std::lock_guard<std::mutex> lk(an_mu_);
    an_.add_dcgm(node, ts, line, labels);
}

int64_t Collection::kernel_time(const std::string& node, const std::string& phase, std::string_view line, int64_t ts) {
    const auto l = joblog::parse_shipped_line(line, phase);
    std::lock_guard<std::mutex> lk(kernel_mu_);
    int64_t& last = last_kernel_[node + "|" + phase];
    if (joblog::is_kernel_tag(l.tag)) {
        const auto t = joblog::kernel_line_time(l.text);
        last = t ? *t : 0;
        return t ? *t : ts;
    }
    if (l.tag == joblog::kKmsgDict && last) return last;
    return ts;
}

void Collection::refuse(const std::string& name, const SafeFile& f) {
    refused_.push_back({escape_line(name), refusal_name(f.refused), escape_line(f.error)});
    std::fprintf(stderr, "jobtrail: not bundled: %s\n", refused_.back().error.c_str());
}

}  // namespace jobtrail::forensics::bundle
