#pragma once

#include <string>
#include <utility>

namespace jobtrail {

// The one error shape of lib/: ok, or a message that says what failed and where (the path and
// errno, the file, line and key), ready for a log line or an internal event's text. Callers
// branch on `ok` and hand `error` on, prefixed with what they were doing if that adds anything.
struct Status {
    bool ok = true;
    std::string error;  // empty when ok

    static Status success() { return {}; }
    static Status failure(std::string what) { return {false, std::move(what)}; }
    explicit operator bool() const { return ok; }
};

// A value, or why there is none: `value` is meaningful only when `ok`.
template <class T>
struct Result : Status {
    T value{};

    Result(T v) : value(std::move(v)) {}                  // NOLINT(google-explicit-constructor): return v;
    Result(Status failed) : Status(std::move(failed)) {}  // NOLINT(google-explicit-constructor): return st;
};

}  // namespace jobtrail
