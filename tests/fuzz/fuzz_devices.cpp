// What device attribution reads: kernel lines with a user-chosen comm in them (oom-kill), the
// driver's information files, nvidia-smi output, Slurm's index lists and job markers (the
// epilog and shipper read them back). None may crash, and what they accept must be well formed.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "devices/attribution.hpp"
#include "devices/gpus.hpp"
#include "node/job_state.hpp"
#include "node/layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace jobtrail;
    const std::string_view in(reinterpret_cast<const char*>(data), size);

    const auto k = devices::parse_oom_kill(in, devices::default_slurm_cgroup_roots());
    if (!k.job_id.empty() && !node::valid_job_id(k.job_id)) __builtin_trap();
    (void)devices::killed_pid(in);

    const auto key = devices::bdf_key(in);
    if (!key.empty() && key.size() != 10) __builtin_trap();

    if (const auto list = devices::parse_index_list(in); list && list->size() > 256) __builtin_trap();

    if (const auto g = devices::parse_nvidia_information(in); g && (g->minor < 0 || devices::bdf_key(g->bdf).empty()))
        __builtin_trap();

    std::vector<std::string> lines;
    size_t from = 0;
    while (from <= in.size() && lines.size() < 64) {
        const size_t nl = in.find('\n', from);
        lines.emplace_back(in.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from));
        if (nl == std::string_view::npos) break;
        from = nl + 1;
    }
    for (const auto& [bdf, serial] : devices::serials_from_smi_csv(lines))
        if (bdf.size() != 10 || serial.empty() || serial.size() > 64) __builtin_trap();

    if (const auto m = node::parse_job_marker(in)) {
        devices::Attributor a;
        a.upsert(m->job_id, m->uid, m->start_ns, m->end_ns, m->devices, m->devices_note);
        const auto r = a.attribute(m->start_ns, in, in.substr(0, 16));
        if (r.basis != devices::Basis::kNode && r.owner.empty()) __builtin_trap();
        (void)node::to_json(*m);
    }
    return 0;
}
