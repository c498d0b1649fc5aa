#pragma once

#include "forensics/bundle/staging.hpp"

namespace jobtrail::forensics::bundle {

// timeline.txt: every staged file (each in time order) merged into one timeline,
// "<rfc3339> <node> <source> <line>", k-way: one line per file in memory at a time.
void write_timeline(const Staging& st);

}  // namespace jobtrail::forensics::bundle
