#include <nlohmann/json.hpp>

#include "shipper/sources/file/file_source.hpp"

namespace jobtrail::shipper {

// A source's checkpoint: {"files": [...]}, one entry per tracked file, by dev:ino, with the
// fingerprint and offset it is known by again after a restart (and where it was, for a rotation
// while the shipper was down; and a CRI file's held pieces); a released file's with its size and
// mtime.
nlohmann::json FileSource::checkpoint() const {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& [k, t] : files_) {
        if (!t.cri.holding()) {
            files.push_back({{"key", k}, {"path", t.path}, {"fp", t.fingerprint}, {"offset", t.emitted_off}});
        } else {
            // P pieces only held here are read again at the next start, and joined again.
            const auto held = t.cri.held_starts();
            files.push_back({{"key", k},
                             {"path", t.path},
                             {"fp", t.fingerprint},
                             {"offset", t.cri.resume_offset(t.emitted_off)},
                             {"cri_done", t.emitted_off},
                             {"cri_held", {held[0], held[1]}}});
        }
        // The last own stamp and how many lines had it (own_time): only of files being read, as
        // one idle long enough to be closed has its next stamp later.
        if (t.run_count && (t.fd.valid() || t.stale)) files.back()["run"] = {t.run_stamp, t.run_count};
    }
    // Released files: known by size and mtime, so that a restart does not take their slots again.
    for (const auto& [k, r] : released_)
        files.push_back(
            {{"key", k},
             {"path", r.path},
             {"fp", r.fingerprint},
             {"offset", r.offset},
             {"released",
              {{"size", r.size}, {"mtime_s", r.mtime.tv_sec}, {"mtime_ns", r.mtime.tv_nsec}, {"uid", r.uid}}}});
    return {{"files", files}};
}

void FileSource::restore(const nlohmann::json& j) {
    if (!j.is_object() || !j.contains("files") || !j["files"].is_array()) return;
    for (const auto& f : j["files"]) {
        if (!f.is_object() || !f.contains("key") || !f.contains("fp") || !f.contains("offset")) continue;
        if (!f["key"].is_string() || !f["fp"].is_string() || !f["offset"].is_number_unsigned()) continue;
        if (const auto r = f.find("released");
            r != f.end() && r->is_object() && r->contains("size") && (*r)["size"].is_number_unsigned() &&
            r->contains("mtime_s") && (*r)["mtime_s"].is_number_integer() && r->contains("mtime_ns") &&
            (*r)["mtime_ns"].is_number_integer() && f.contains("path") && f["path"].is_string()) {
            Released rel{f["path"].get<std::string>(),
                         f["fp"].get<std::string>(),
                         f["offset"].get<uint64_t>(),
                         (*r)["size"].get<uint64_t>(),
                         {},
                         true,
                         0};
            rel.mtime.tv_sec = (*r)["mtime_s"].get<time_t>();
            rel.mtime.tv_nsec = (*r)["mtime_ns"].get<long>();
            // Older checkpoints have no owner: the first scan, before any release, sets it.
            if (const auto u = r->find("uid"); u != r->end() && u->is_number_unsigned()) rel.uid = u->get<uid_t>();
            released_[f["key"].get<std::string>()] = std::move(rel);
            continue;
        }
        saved_[f["key"].get<std::string>()] = {f["fp"].get<std::string>(), f["offset"].get<uint64_t>()};
        if (f.contains("path") && f["path"].is_string())
            saved_paths_[f["key"].get<std::string>()] = f["path"].get<std::string>();
        if (f.contains("cri_done") && f["cri_done"].is_number_unsigned() && f.contains("cri_held") &&
            f["cri_held"].is_array() && f["cri_held"].size() == 2 && f["cri_held"][0].is_number_integer() &&
            f["cri_held"][1].is_number_integer())
            saved_cri_[f["key"].get<std::string>()] = {
                f["cri_done"].get<uint64_t>(), {f["cri_held"][0].get<int64_t>(), f["cri_held"][1].get<int64_t>()}};
        if (f.contains("run") && f["run"].is_array() && f["run"].size() == 2 && f["run"][0].is_number_integer() &&
            f["run"][1].is_number_unsigned()) {
            // Where its next line was: past the CRI pieces read again for the ones held.
            const bool cri = f.contains("cri_done") && f["cri_done"].is_number_unsigned();
            saved_runs_[f["key"].get<std::string>()] = {
                f["fp"].get<std::string>(), cri ? f["cri_done"].get<uint64_t>() : f["offset"].get<uint64_t>(),
                f["run"][0].get<int64_t>(), f["run"][1].get<uint64_t>()};
        }
    }
}

}  // namespace jobtrail::shipper
