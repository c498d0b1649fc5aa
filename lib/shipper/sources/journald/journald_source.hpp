#pragma once

#include <map>
#include <memory>
#include <string>

#include "shipper/sources/journald/config.hpp"
#include "shipper/sources/source.hpp"

struct sd_journal;

namespace jobtrail::shipper {

// The systemd journal, filtered by unit, resumed from its cursor: after a restart the entry the
// cursor names is skipped and reading goes on after it; on the first start it begins `since`
// ago. One stream per unit and priority (labels `unit`, `priority`), the pid as metadata. Each
// entry is stamped with journald's microsecond, plus a nanosecond for each entry before it in
// that microsecond.
class JournaldSource : public Source {
public:
    JournaldSource(JournaldConfig cfg, NodeInfo node, uint64_t max_line, Metrics& m, Events events = {});
    ~JournaldSource() override;
    JournaldSource(const JournaldSource&) = delete;
    JournaldSource& operator=(const JournaldSource&) = delete;

    const std::string& name() const override { return name_; }
    node::StreamKind kind() const override { return node::StreamKind::kJournal; }
    bool poll(std::vector<Event>& out, size_t max_bytes) override;
    nlohmann::json checkpoint() const override;
    void restore(const nlohmann::json& state) override;

    // False when this build has no libsystemd: the source then reads nothing.
    static bool available();

private:
    Status open();
    const std::shared_ptr<const Origin>& origin(const std::string& unit, int priority);

    std::string name_ = "journald";
    JournaldConfig cfg_;
    NodeInfo node_;
    uint64_t max_line_;
    Drops& drops_;
    Events events_;
    bool open_failed_ = false;
    sd_journal* j_ = nullptr;
    bool current_unread_ = false;  // positioned on an entry not yet handed out
    std::string cursor_;           // the last entry read
    // Loki keeps one entry per stream, time and line, and journald stamps microseconds: an entry
    // at the microsecond of the one handed out before it gets the next nanosecond (same_usec_ of
    // them before it). Kept with the cursor, so a restart gives the same times again.
    uint64_t last_usec_ = 0, same_usec_ = 0;
    std::map<std::pair<std::string, int>, std::shared_ptr<const Origin>> origins_;
    int64_t next_open_ns_ = 0;  // retry opening no more than once a minute
};

}  // namespace jobtrail::shipper
