#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "node/job_state.hpp"

// Which GPUs a job was given, resolved once in the prolog from what Slurm says (SLURM_JOB_GPUS)
// and what the driver says (/proc/driver/nvidia/gpus/<bdf>/information), so that a kernel
// record naming a PCI address can be given to the job that owned the device.
namespace jobtrail::devices {

struct GpuInfo {
    int minor = -1;   // "Device Minor:", the N of /dev/nvidiaN
    std::string bdf;  // "Bus Location:", e.g. 0000:3b:00.0
    std::string uuid, model;
};

// The driver's information file (kernel-open/nvidia/nv-procfs.c: "Key: \t value" lines). nullopt
// without a Device Minor or Bus Location line.
std::optional<GpuInfo> parse_nvidia_information(std::string_view text);

// Every GPU listed under root (normally /proc/driver/nvidia), in minor order; at most 64. What
// could not be read is said in `note`.
std::vector<GpuInfo> read_nvidia_gpus(const std::string& root, std::string& note);

// Slurm's index lists: "0,1,3" or "0-3,5". nullopt when malformed (or more than 256 entries).
std::optional<std::vector<int>> parse_index_list(std::string_view s);

// The PCI address as a key: domain:bus:slot in lower case ("0000:3b:00"). Xid lines print it
// without the function, nvidia-smi with an 8-digit domain in upper case. Empty if not one.
std::string bdf_key(std::string_view bdf);

// nvidia-smi --query-gpu=...pci.bus_id...serial... --format=csv (with its header line): bdf key
// to serial. Lines it cannot read are skipped.
std::map<std::string, std::string> serials_from_smi_csv(const std::vector<std::string>& lines);

// `slurmd -G` lines ("slurmd: Gres Name=gpu Type=h100 Count=4 Index=0 ID=7696487
// File=/dev/nvidia[0-3] ..."): Slurm's GPU index (what SLURM_JOB_GPUS holds: a position in the
// node's GRES list, counted over the records in the order slurmd lists them; not the device
// minor, nor -G's own "Index=") to its device file. Every gres.conf form: a range, one line per
// device, typed lines. A GPU record it cannot read (no file, a MIG slice, MultipleFiles) ends the
// mapping there, and `why` says what it was; at most 256 GPUs.
std::map<int, std::string> parse_gres_gpu_files(const std::vector<std::string>& lines, std::string* why = nullptr);

// "/dev/nvidia[0-3,5]" or "/dev/nvidia0,/dev/nvidia1" into files; empty when malformed.
std::vector<std::string> expand_file_list(std::string_view s);

struct Resolution {
    std::vector<node::JobDevice> devices;
    std::string note;  // what is missing, for the marker and the prolog log; empty when whole
};

// SLURM_JOB_GPUS (Slurm's GPU indices) through index_to_minor (from the device files of
// parse_gres_gpu_files) against the driver's GPUs. What cannot be mapped is named in the note,
// and its records are then the node's, never a guessed job's.
Resolution resolve_job_gpus(std::string_view job_gpus, const std::map<int, int>& index_to_minor,
                            const std::vector<GpuInfo>& gpus, const std::map<std::string, std::string>& serials);

// "GPU 3 (0000:3b:00.0, serial 1650…)": how summaries name a device.
std::string describe(const node::JobDevice& d);

}  // namespace jobtrail::devices
