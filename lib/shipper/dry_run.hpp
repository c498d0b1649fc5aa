#pragma once

#include <cstdio>
#include <memory>
#include <vector>

#include "shipper/sources/source.hpp"
#include "shipper/stages/stages.hpp"

namespace jobtrail::shipper {

// `jobtrail-shipper --dry-run`: reads what is there, runs the stages and prints each record as
// it would be sent (time, stream, line, |metadata). Touches no position and no spool.
void print_dry_run(std::vector<std::unique_ptr<Source>>& sources, Stages& stages, size_t pass_bytes, std::FILE* out);

}  // namespace jobtrail::shipper
