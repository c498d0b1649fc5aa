#include "collector/job_devices.hpp"

#include "common/text.hpp"
#include "common/time.hpp"
#include "joblog/format.hpp"

namespace jobtrail::collector {

devices::Resolution resolve_job_devices(const Session& s,
                                        const std::map<std::string, std::vector<std::string>>& probe_stdout) {
    if (s.facts().gpus.empty()) return {};
    std::string note;
    const auto gpus = devices::read_nvidia_gpus(s.config().collector.nvidia_proc, note);
    std::map<std::string, std::string> serials;
    for (const auto& [name, lines] : probe_stdout)
        for (auto& [k, v] : devices::serials_from_smi_csv(lines)) serials.emplace(k, v);
    auto r = devices::resolve_job_gpus(s.facts().gpus, gpus, serials);
    if (!note.empty() && (!r.note.empty() || r.devices.empty())) r.note += (r.note.empty() ? "" : "; ") + note;
    return r;
}

void log_job_devices(Session& s, const devices::Resolution& r) {
    for (const auto& d : r.devices) {
        std::string text = "kind=" + d.kind + " index=" + std::to_string(d.index) + " bdf=" + logfmt_value(d.bdf);
        if (!d.uuid.empty()) text += " uuid=" + logfmt_value(d.uuid);
        if (!d.serial.empty()) text += " serial=" + logfmt_value(d.serial);
        s.log().line(realtime_ns(), joblog::kDevice, "", text, /*force=*/true);
    }
    if (!r.note.empty())
        s.log().line(realtime_ns(), joblog::kDevice, "unresolved",
                     "note=" + logfmt_value(r.note) + " attribution=node-wide", /*force=*/true);
}

}  // namespace jobtrail::collector
