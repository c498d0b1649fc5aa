#include "node/job_state.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace jobtrail::node {
namespace {

using nlohmann::json;

constexpr size_t kMaxRecordBytes = 16384;  // a marker with 16 GPUs is about 3 KiB
constexpr size_t kMaxDevices = 64;

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
    json j = {{"job_id", m.job_id}, {"user", m.user},         {"uid", m.uid},
              {"node", m.node},     {"start_ns", m.start_ns}, {"trace", m.trace}};
    if (!m.devices.empty()) {
        json devs = json::array();
        for (const auto& d : m.devices) {
            json o = {{"kind", d.kind}, {"index", d.index}, {"bdf", d.bdf}};
            if (!d.uuid.empty()) o["uuid"] = d.uuid;
            if (!d.serial.empty()) o["serial"] = d.serial;
            devs.push_back(std::move(o));
        }
        j["devices"] = std::move(devs);
    }
    if (!m.devices_note.empty()) j["devices_note"] = m.devices_note;
    if (m.end_ns) j["end_ns"] = m.end_ns;
    return dump(j);
}

std::optional<JobMarker> parse_job_marker(std::string_view text) {
    const json j = parse_object(text);
    if (!j.is_object() || !valid_job_id(str(j, "job_id"))) return std::nullopt;
    JobMarker m{
        str(j, "job_id"),       str(j, "user"),  str(j, "uid"), str(j, "node"), str(j, "trace"), i64(j, "start_ns"), {},
        str(j, "devices_note"), i64(j, "end_ns")};
    if (auto it = j.find("devices"); it != j.end() && it->is_array()) {
        for (const auto& o : *it) {
            if (!o.is_object() || m.devices.size() >= kMaxDevices) continue;
            const auto idx = o.find("index");
            if (idx == o.end() || !idx->is_number_integer()) continue;
            const int64_t index = idx->get<int64_t>();
            const std::string bdf = str(o, "bdf");
            if (bdf.empty() || bdf.size() > 32 || index < 0 || index > 1'000'000) continue;
            JobDevice d{str(o, "kind"), static_cast<int>(index), str(o, "bdf"), str(o, "uuid"), str(o, "serial")};
            m.devices.push_back(std::move(d));
        }
    }
    return m;
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

std::optional<StepRecord> read_step_record(const Layout& l, const std::string& name) {
    const auto text = read_small_file(l.steps_dir() + "/" + name, kMaxRecordBytes);
    if (!text) return std::nullopt;
    auto r = parse_step_record(*text);
    if (!r || name != r->job_id + "." + r->step) return std::nullopt;
    return r;
}

std::vector<StepRecord> read_step_records(const Layout& l) {
    std::vector<StepRecord> out;
    for (const auto& name : entries(l.steps_dir()))
        if (auto r = read_step_record(l, name)) out.push_back(std::move(*r));
    return out;
}

namespace {
constexpr size_t kMaxEnded = 256;
constexpr int64_t kEndedKeepNs = 3600LL * 1'000'000'000;
}  // namespace

std::vector<JobMarker> read_ended_markers(const Layout& l) {
    std::vector<JobMarker> out;
    for (const auto& name : entries(l.ended_dir())) {
        if (!valid_job_id(name)) continue;
        const auto text = read_small_file(l.ended_marker(name), kMaxRecordBytes);
        if (!text) continue;
        auto m = parse_job_marker(*text);
        if (m && m->job_id == name && m->end_ns > 0) out.push_back(std::move(*m));
    }
    return out;
}

void remove_job_state(const Layout& l, const std::string& job_id, int64_t end_ns) {
    if (!valid_job_id(job_id)) return;
    if (end_ns > 0) {
        if (auto m = read_job_marker(l, job_id); m && make_dirs(l.ended_dir(), 0755).ok) {
            m->end_ns = end_ns;
            (void)write_file_atomic(l.ended_marker(job_id), to_json(*m), 0644);
        }
        // Keep the last hour, and at most kMaxEnded jobs.
        auto ended = read_ended_markers(l);
        std::sort(ended.begin(), ended.end(),
                  [](const JobMarker& a, const JobMarker& b) { return a.end_ns > b.end_ns; });
        for (size_t i = 0; i < ended.size(); ++i)
            if (i >= kMaxEnded || ended[i].end_ns < end_ns - kEndedKeepNs)
                ::unlink(l.ended_marker(ended[i].job_id).c_str());
    }
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
