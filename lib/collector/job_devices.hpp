#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "collector/session.hpp"
#include "devices/gpus.hpp"

namespace jobtrail::collector {

// Prolog: the job's GPUs (SLURM_JOB_GPUS) as the driver names them under collector.nvidia_proc,
// with the serials of the nvidia-smi probe's CSV where it ran (`probe_stdout`, by probe name).
devices::Resolution resolve_job_devices(const Session& s,
                                        const std::map<std::string, std::vector<std::string>>& probe_stdout = {});

// The slurmd beside the slurmd or slurmstepd executable that `pid` is or descends from (up to
// four generations), for a Slurm installed under a prefix whose sbin/ is in no PATH; "" if none.
std::string slurmd_beside(pid_t pid);

// One `device` line per device in the job log (`kind=gpu index=1 bdf=… uuid=… serial=…`), and
// `device[unresolved]` with the note when something is missing: the bundle and `jobtrail node`
// read the job's devices back from these.
void log_job_devices(Session& s, const devices::Resolution& r);

}  // namespace jobtrail::collector
