#include "node/job_state.hpp"

#include <dirent.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace jobtrail::node {
namespace {

using nlohmann::json;

constexpr size_t kMaxRecordBytes = 4096;

std::string str(const json& j, const char* key) {
    auto it = j.find(key);
    return (it != j.end() && it->is_string()) ? it->get<std::string>() : std::string();
}

int64_t i64(const json& j, const char* key) {
    auto it = j.find(key);
    return (it != j.end() && it->is_number_integer()) ? it->get<int64_t>() : 0;
}

json parse_object(std::string_view text) {
    json j = json::parse(text, nullptr, false);
    return j.is_object() ? j : json();
}

// Values come from users (a trace request) and must never make the writer throw.
std::string dump(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> out;
    DIR* d = ::opendir(dir.c_str());
    if (!d) return out;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        // Temporary files of a writer in progress end in .tmp.<pid>.<n>.
        if (name[0] == '.' || name.find(".tmp.") != std::string::npos) continue;
        out.push_back(name);
    }
    ::closedir(d);
    return out;
}

}  // namespace

std::string to_json(const JobMarker& m) {
    return dump({{"job_id", m.job_id},
                 {"user", m.user},
                 {"uid", m.uid},
                 {"node", m.node},
                 {"start_ns", m.start_ns},
                 {"trace", m.trace}});
}

std::optional<JobMarker> parse_job_marker(std::string_view text) {
    const json j = parse_object(text);
    if (!j.is_object() || !valid_job_id(str(j, "job_id"))) return std::nullopt;
    return JobMarker{str(j, "job_id"), str(j, "user"),  str(j, "uid"),
                     str(j, "node"),   str(j, "trace"), i64(j, "start_ns")};
}

Status write_job_marker(const Layout& l, const JobMarker& m) {
    if (!valid_job_id(m.job_id)) return Status::failure("not a job id: '" + m.job_id + "'");
    if (auto st = make_dirs(l.jobs_dir(), 0755); !st.ok) return st;
    return write_file_atomic(l.job_marker(m.job_id), to_json(m), 0644);
}

std::optional<JobMarker> read_job_marker(const Layout& l, const std::string& job_id) {
    if (!valid_job_id(job_id)) return std::nullopt;
    const auto text = read_small_file(l.job_marker(job_id), kMaxRecordBytes);
    if (!text) return std::nullopt;
    auto m = parse_job_marker(*text);
    if (m && m->job_id != job_id) return std::nullopt;
    return m;
}

std::vector<JobMarker> read_job_markers(const Layout& l) {
    std::vector<JobMarker> out;
    for (const auto& name : entries(l.jobs_dir()))
        if (auto m = read_job_marker(l, name)) out.push_back(std::move(*m));
    return out;
}

std::string to_json(const StepRecord& r) {
    json j = {{"job_id", r.job_id}, {"step", r.step}, {"start_ns", r.start_ns}, {"trace", r.trace}};
    if (!r.nccl_file.empty()) j["nccl_file"] = r.nccl_file;
    return dump(j);
}

std::optional<StepRecord> parse_step_record(std::string_view text) {
    const json j = parse_object(text);
    if (!j.is_object() || !valid_job_id(str(j, "job_id")) || str(j, "step").empty()) return std::nullopt;
    return StepRecord{str(j, "job_id"), str(j, "step"), str(j, "trace"), i64(j, "start_ns"), str(j, "nccl_file")};
}

Status write_step_record(const Layout& l, const StepRecord& r) {
    if (!valid_job_id(r.job_id)) return Status::failure("not a job id: '" + r.job_id + "'");
    if (auto st = make_dirs(l.steps_dir(), 0755); !st.ok) return st;
    return write_file_atomic(l.step_record(r.job_id, r.step), to_json(r), 0644);
}

std::vector<StepRecord> read_step_records(const Layout& l) {
    std::vector<StepRecord> out;
    for (const auto& name : entries(l.steps_dir())) {
        const auto text = read_small_file(l.steps_dir() + "/" + name, kMaxRecordBytes);
        if (!text) continue;
        auto r = parse_step_record(*text);
        if (r && name == r->job_id + "." + r->step) out.push_back(std::move(*r));
    }
    return out;
}

void remove_job_state(const Layout& l, const std::string& job_id) {
    if (!valid_job_id(job_id)) return;
    ::unlink(l.job_marker(job_id).c_str());
    const std::string prefix = job_id + ".";
    for (const auto& name : entries(l.steps_dir()))
        if (name.compare(0, prefix.size(), prefix) == 0) ::unlink((l.steps_dir() + "/" + name).c_str());
}

std::string to_json(const KmsgMark& m) {
    return dump({{"boot_id", m.boot_id}, {"next_seq", m.next_seq}, {"start_ns", m.start_ns}});
}

std::optional<KmsgMark> parse_kmsg_mark(std::string_view text) {
    const json j = parse_object(text);
    if (!j.is_object() || !j.contains("next_seq") || !j["next_seq"].is_number_unsigned()) return std::nullopt;
    return KmsgMark{str(j, "boot_id"), j["next_seq"].get<uint64_t>(), i64(j, "start_ns")};
}

}  // namespace jobtrail::node
