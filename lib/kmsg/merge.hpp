#pragma once

#include <optional>
#include <vector>

#include "kmsg/record.hpp"

namespace jobtrail::kmsg {

// Joins line fragments: older kernels emit a printk continuation as a record flagged 'c'
// followed by records flagged '+'. The merged record keeps the first fragment's seq and time.
class FragmentMerger {
public:
    // Feeds one record; appends zero, one or two finished records to out.
    void push(Record r, std::vector<Record>& out);
    // Emits a pending fragment (call at end of input or when the source goes idle).
    void flush(std::vector<Record>& out);
    bool pending() const { return pending_.has_value(); }

private:
    std::optional<Record> pending_;
};

}  // namespace jobtrail::kmsg
