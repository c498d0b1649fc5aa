#pragma once

#include <vector>

#include "collector/kernel_ring.hpp"
#include "collector/session.hpp"

namespace jobtrail::collector {

// Prolog: reads the ring once, saves where it ends (the job's mark) under the state directory,
// and writes the last records before the job (kernel_context) as `kmsg-context` lines.
void record_kernel_mark(Session& s);

// Epilog: writes every record since the job's mark as `kmsg` lines (a `kmsg-lost` line where
// the ring wrapped), then one `event` line per recognised event and a summary. Returns the
// events; the mark file is removed.
std::vector<EventHit> record_kernel_delta(Session& s, const events::Extractor& ex);

}  // namespace jobtrail::collector
