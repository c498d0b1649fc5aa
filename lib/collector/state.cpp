#include "collector/state.hpp"

#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

namespace jobtrail::collector {

using nlohmann::json;

namespace {

// Tolerates hand-edited or foreign files: a wrong type reads as empty, never throws.
std::string str(const json& j, const char* key) {
    auto it = j.find(key);
    return (it != j.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

int64_t i64(const json& j, const char* key) {
    auto it = j.find(key);
    return (it != j.end() && it->is_number_integer()) ? it->get<int64_t>() : 0;
}

}  // namespace

std::string job_marker_path(const std::string& run_dir, const std::string& job_id) {
    return run_dir + "/jobs/" + job_id;
}

std::string step_records_dir(const std::string& run_dir) {
    return run_dir + "/steps";
}

void remove_job_state(const std::string& run_dir, const std::string& job_id) {
    ::unlink(job_marker_path(run_dir, job_id).c_str());
    std::error_code ec;
    const std::string prefix = job_id + ".";
    for (const auto& e : std::filesystem::directory_iterator(step_records_dir(run_dir), ec)) {
        const std::string name = e.path().filename().string();
        if (name.compare(0, prefix.size(), prefix) == 0) std::filesystem::remove(e.path(), ec);
    }
}

std::string marker_to_json(const JobMarker& m) {
    json j = {{"job_id", m.job_id}, {"user", m.user},         {"uid", m.uid},
              {"node", m.node},     {"start_ns", m.start_ns}, {"trace", m.trace}};
    return j.dump() + "\n";
}

std::optional<JobMarker> marker_from_json(const std::string& text) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("job_id")) return std::nullopt;
    JobMarker m;
    m.job_id = str(j, "job_id");
    m.user = str(j, "user");
    m.uid = str(j, "uid");
    m.node = str(j, "node");
    m.trace = str(j, "trace");
    m.start_ns = i64(j, "start_ns");
    return m;
}

std::string kmsg_mark_path(const std::string& state_dir, const std::string& job_id) {
    return state_dir + "/kmsg-marks/" + job_id;
}

std::string mark_to_json(const KmsgMark& m) {
    json j = {{"boot_id", m.boot_id}, {"next_seq", m.next_seq}, {"start_ns", m.start_ns}};
    return j.dump() + "\n";
}

std::optional<KmsgMark> mark_from_json(const std::string& text) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("next_seq") || !j["next_seq"].is_number_unsigned())
        return std::nullopt;
    KmsgMark m;
    m.boot_id = str(j, "boot_id");
    m.next_seq = j["next_seq"].get<uint64_t>();
    m.start_ns = i64(j, "start_ns");
    return m;
}

}  // namespace jobtrail::collector
