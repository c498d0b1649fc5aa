#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>

// Named events of the shipper's components (Vector's internal_events): a source that cannot open
// its device, a file refused, a push rejected. Each is counted by (component, name) in /metrics,
// written to stderr and, for warnings and errors, to the shipper's own stream (rate-limited).
// The severity is said by whoever emits, never guessed from the text.
namespace jobtrail::shipper {

enum class Severity { kInfo, kWarning, kError };
std::string_view severity_name(Severity s);

struct InternalEvent {
    Severity severity = Severity::kInfo;
    std::string component;  // a source's name, "sender", "spool", "pipeline"
    std::string name;       // what happened, as a metric label: open_failed, file_refused, ...
    std::string message;    // for people: what and where
};

class Events {
public:
    using Sink = std::function<void(const InternalEvent&)>;
    Events() = default;
    explicit Events(Sink sink) : sink_(std::move(sink)) {}
    void emit(Severity s, std::string component, std::string name, std::string message) const {
        if (sink_) sink_({s, std::move(component), std::move(name), std::move(message)});
    }

private:
    Sink sink_;
};

}  // namespace jobtrail::shipper
