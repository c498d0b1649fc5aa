#pragma once

#include <functional>
#include <string>

#include "collector/session.hpp"

namespace jobtrail::collector {

// Common main() of the collectors: --config/--version/--help, signal dispositions, and a last
// line of defence so that no exception of ours turns into a failed Prolog (a drained node).
// slurmd runs us without arguments; unknown arguments are reported, not fatal.
int collector_main(int argc, char** argv, const char* prog, const std::function<int(const std::string&)>& run);

// Runs one of jobtrail's own steps; an exception becomes a notice instead of a failure.
void guarded(Session& s, const char* step, const std::function<void()>& fn);

}  // namespace jobtrail::collector
