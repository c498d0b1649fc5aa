#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.hpp"

namespace jobtrail {

// Expands a Slurm hostlist ("gpu[01-04,07],login1", "r[1-2]n[1-2]") into its host names, in
// order: what SLURM_JOB_NODELIST holds, read back from Loki (untrusted). A range's numbers are
// padded to the width of its first number, as Slurm does; several bracket groups in one name
// multiply. Refuses more than max_hosts names, names over 255 bytes and bytes that are not
// hostname characters, saying what and at which byte.
Result<std::vector<std::string>> expand_hostlist(std::string_view list, size_t max_hosts = 16384);

}  // namespace jobtrail
