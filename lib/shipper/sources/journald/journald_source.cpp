#include "shipper/sources/journald/journald_source.hpp"

#include <cstdlib>
#include <cstring>

#include "common/text.hpp"
#include "common/time.hpp"
#include "kmsg/record.hpp"
#include "node/schema.hpp"

#ifdef JOBTRAIL_HAVE_JOURNALD
#include <systemd/sd-journal.h>
#endif

namespace jobtrail::shipper {

JournaldSource::JournaldSource(JournaldConfig cfg, NodeInfo node, uint64_t max_line, Metrics& m, Events events)
    : cfg_(std::move(cfg)),
      node_(std::move(node)),
      max_line_(max_line),
      drops_(m.group<Drops>()),
      events_(std::move(events)) {}

void JournaldSource::restore(const nlohmann::json& state) {
    if (!state.is_object()) return;
    if (state.contains("cursor") && state["cursor"].is_string()) cursor_ = state["cursor"].get<std::string>();
    for (auto [name, v] : {std::pair{"usec", &last_usec_}, {"same_usec", &same_usec_}})
        if (state.contains(name) && state[name].is_number_unsigned()) *v = state[name].get<uint64_t>();
}

nlohmann::json JournaldSource::checkpoint() const {
    return {{"cursor", cursor_}, {"usec", last_usec_}, {"same_usec", same_usec_}};
}

const std::shared_ptr<const Origin>& JournaldSource::origin(const std::string& unit, int priority) {
    auto& o = origins_[{unit, priority}];
    if (!o) {
        const std::string& job = node::Schema::defaults().job(node::StreamKind::kJournal);
        loki::LabelSet labels = {{node::label::kCluster, node_.cluster},
                                 {node::label::kNode, node_.node},
                                 {node::label::kJob, job},
                                 {node::label::kPriority, kmsg::level_name(static_cast<uint8_t>(priority & 7))}};
        if (!unit.empty()) {
            labels[node::label::kUnit] = unit;
            const size_t dot = unit.rfind('.');
            labels[node::label::kServiceName] = unit.substr(0, dot == std::string::npos ? unit.size() : dot);
        } else {
            labels[node::label::kServiceName] = job;
        }
        o = make_origin(std::move(labels), {}, node::StreamKind::kJournal);
    }
    return o;
}

#ifdef JOBTRAIL_HAVE_JOURNALD

bool JournaldSource::available() {
    return true;
}

JournaldSource::~JournaldSource() {
    if (j_) sd_journal_close(j_);
}

namespace {

// A field's value ("MESSAGE=text" -> "text"), empty when the entry has none.
std::string_view field(sd_journal* j, const char* name, size_t name_len) {
    const void* data = nullptr;
    size_t len = 0;
    if (sd_journal_get_data(j, name, &data, &len) < 0 || len <= name_len) return {};
    return {static_cast<const char*>(data) + name_len + 1, len - name_len - 1};
}

}  // namespace

Status JournaldSource::open() {
    const int r = cfg_.directory.empty() ? sd_journal_open(&j_, SD_JOURNAL_LOCAL_ONLY)
                                         : sd_journal_open_directory(&j_, cfg_.directory.c_str(), 0);
    if (r < 0) {
        j_ = nullptr;
        Status st = Status::failure("cannot open the journal" +
                                    (cfg_.directory.empty() ? "" : " in " + cfg_.directory) + ": " + std::strerror(-r));
        // Retried every pass; said once until it works again.
        if (!open_failed_) events_.emit(Severity::kError, name_, event::kOpenFailed, st.error);
        open_failed_ = true;
        return st;
    }
    open_failed_ = false;
    for (const auto& u : cfg_.units) {
        const std::string match = "_SYSTEMD_UNIT=" + u;
        sd_journal_add_match(j_, match.data(), match.size());
        sd_journal_add_disjunction(j_);
    }
    // New and rotated journal files are noticed through inotify, set up by asking for the fd.
    sd_journal_get_fd(j_);
    sd_journal_set_data_threshold(j_, static_cast<size_t>(max_line_));
    current_unread_ = false;
    if (!cursor_.empty() && sd_journal_seek_cursor(j_, cursor_.c_str()) >= 0) {
        // On the entry we shipped last: go on after it. If it is gone (vacuumed), we stand on the
        // first entry after where it was, which is not shipped yet.
        if (sd_journal_next(j_) > 0) current_unread_ = sd_journal_test_cursor(j_, cursor_.c_str()) <= 0;
    } else {
        sd_journal_seek_realtime_usec(j_, static_cast<uint64_t>(realtime_ns() / 1000 - cfg_.since_ms * 1000));
    }
    return {};
}

bool JournaldSource::poll(std::vector<Event>& out, size_t max_bytes) {
    if (!j_) {
        if (monotonic_ns() < next_open_ns_) return false;
        next_open_ns_ = monotonic_ns() + 60'000'000'000;
        if (!open().ok) return false;
    }
    sd_journal_process(j_);
    size_t bytes = 0;
    while (bytes < max_bytes) {
        const int r = current_unread_ ? 1 : sd_journal_next(j_);
        current_unread_ = false;
        if (r == 0) break;
        if (r < 0) {
            // A damaged journal file: reopen later from the last cursor.
            drops_("journal_read_error");
            sd_journal_close(j_);
            j_ = nullptr;
            break;
        }
        // Each entry's cursor as it is read: the times below count from it, and a read error
        // further on must not make a restart hand out these entries again.
        if (char* c = nullptr; sd_journal_get_cursor(j_, &c) >= 0 && c) {
            cursor_ = c;
            std::free(c);  // NOLINT(cppcoreguidelines-no-malloc): sd_journal_get_cursor allocates with malloc
        }
        const std::string_view msg = field(j_, "MESSAGE", 7);
        if (msg.empty()) continue;
        uint64_t usec = 0;
        sd_journal_get_realtime_usec(j_, &usec);
        // Over a thousand entries in one microsecond would run into the next: journald writes
        // far fewer.
        same_usec_ = usec == last_usec_ ? same_usec_ + 1 : 0;
        last_usec_ = usec;
        const std::string_view prio = field(j_, "PRIORITY", 8);
        const int level = prio.size() == 1 && prio[0] >= '0' && prio[0] <= '7' ? prio[0] - '0' : 6;
        Event e;
        e.ts_ns = static_cast<int64_t>(usec) * 1000 + static_cast<int64_t>(same_usec_);
        e.origin = origin(std::string(field(j_, "_SYSTEMD_UNIT", 13)), level);
        e.line = escape_line(utf8_prefix(msg, max_line_));
        if (const auto pid = field(j_, "_PID", 4); !pid.empty())
            e.metadata.emplace_back(node::metadata::kPid, std::string(pid));
        bytes += e.line.size() + 64;
        out.push_back(std::move(e));
    }
    return bytes >= max_bytes;
}

#else  // built without libsystemd

bool JournaldSource::available() {
    return false;
}
JournaldSource::~JournaldSource() = default;
Status JournaldSource::open() {
    return Status::failure("this build has no libsystemd");
}
bool JournaldSource::poll(std::vector<Event>&, size_t) {
    return false;
}

#endif

void JournaldKind::build(const SourceContext& c, const Config& j, Sources& out) {
    if (!j.enabled) return;
    if (!JournaldSource::available()) {
        c.events.emit(Severity::kWarning, "journald", event::kNotBuilt,
                      "shipper.sources.journald is enabled but this build has no libsystemd: not read");
        return;
    }
    out.push_back(std::make_unique<JournaldSource>(j, c.node, c.cfg.shipper.max_line_bytes, c.metrics, c.events));
}

}  // namespace jobtrail::shipper
