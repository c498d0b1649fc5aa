#pragma once

// Strict, tolerant YAML reading shared by every section of jobtrail.yaml: each problem becomes a
// ConfigError naming file, line, column and key, and the value keeps its default.

#include <yaml-cpp/yaml.h>

#include <initializer_list>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/time.hpp"
#include "config/config.hpp"

namespace jobtrail::config {

// Units for the bounds of numeric keys.
inline constexpr int64_t kMs = 1, kSec = 1'000, kMin = 60'000, kDay = 86'400'000;
inline constexpr uint64_t kKiB = 1ULL << 10, kMiB = 1ULL << 20, kGiB = 1ULL << 30;

class Parser {
public:
    Parser(std::string file, std::vector<ConfigError>& errors) : file_(std::move(file)), errors_(errors) {}

    void error(const YAML::Node& n, const std::string& key, const std::string& msg) {
        const YAML::Mark m = n.Mark();
        errors_.push_back({file_, m.line >= 0 ? m.line + 1 : 0, m.column >= 0 ? m.column + 1 : 0, key, msg});
    }

    // Reports keys of a mapping that are not in `allowed`; false if n is not a mapping.
    bool check_map(const YAML::Node& n, const std::string& where, std::initializer_list<const char*> allowed) {
        return check_map(n, where, std::span<const char* const>(allowed.begin(), allowed.size()));
    }
    bool check_map(const YAML::Node& n, const std::string& where, std::span<const char* const> allowed) {
        if (!n.IsMap()) {
            error(n, where, "expected a mapping of keys");
            return false;
        }
        for (const auto& kv : n) {
            const std::string k = kv.first.as<std::string>("");
            bool ok = false;
            for (const char* a : allowed) ok = ok || k == a;
            if (!ok) {
                std::string list;
                for (const char* a : allowed) list += std::string(list.empty() ? "" : ", ") + a;
                error(kv.first, join(where, k), "unknown key (allowed here: " + list + ")");
            }
        }
        return true;
    }

    static std::string join(const std::string& a, const std::string& b) { return a.empty() ? b : a + "." + b; }

    void string(const YAML::Node& parent, const std::string& where, const char* key, std::string& out) {
        const YAML::Node n = parent[key];
        if (!n) return;
        if (!n.IsScalar() || n.Scalar().empty()) {
            error(n, join(where, key), "expected a non-empty string");
            return;
        }
        out = n.Scalar();
    }

    void path(const YAML::Node& parent, const std::string& where, const char* key, std::string& out) {
        std::string v = out;
        string(parent, where, key, v);
        if (v != out && !v.empty() && v[0] != '/') {
            error(parent[key], join(where, key), "expected an absolute path, got '" + v + "'");
            return;
        }
        out = v;
    }

    void boolean(const YAML::Node& parent, const std::string& where, const char* key, bool& out) {
        const YAML::Node n = parent[key];
        if (!n) return;
        bool v = false;
        try {
            v = n.as<bool>();
        } catch (const YAML::Exception&) {
            error(n, join(where, key), "expected true or false");
            return;
        }
        out = v;
    }

    // A duration within [min_ms, max_ms]. zero_is_off: 0 is also accepted and means "none"
    // (heartbeat: 0). Bounds keep a typo from overflowing a deadline or never timing out.
    void duration(const YAML::Node& parent, const std::string& where, const char* key, int64_t& out_ms, int64_t min_ms,
                  int64_t max_ms, bool zero_is_off = false) {
        const YAML::Node n = parent[key];
        if (!n) return;
        const std::string got = n.IsScalar() ? n.Scalar() : std::string("(not a scalar)");
        const std::string range = (zero_is_off ? "0 (none) or " : "") + format_ms(min_ms) + " to " + format_ms(max_ms);
        auto v = n.IsScalar() ? parse_duration_ms(n.Scalar()) : std::nullopt;
        if (!v) {
            error(n, join(where, key),
                  "expected a duration such as 500ms, 30s, 5m or 1d (" + range + "), got '" + got + "'");
            return;
        }
        if (!(zero_is_off && *v == 0) && (*v < min_ms || *v > max_ms)) {
            error(n, join(where, key), "'" + got + "' is out of range: expected " + range);
            return;
        }
        out_ms = *v;
    }

    // A size in bytes within [min, max]; zero_is_off as for duration().
    void size(const YAML::Node& parent, const std::string& where, const char* key, uint64_t& out, uint64_t min,
              uint64_t max, bool zero_is_off = false) {
        const YAML::Node n = parent[key];
        if (!n) return;
        const std::string got = n.IsScalar() ? n.Scalar() : std::string("(not a scalar)");
        const std::string range = (zero_is_off ? "0 (none) or " : "") + format_bytes(min) + " to " + format_bytes(max);
        auto v = n.IsScalar() ? parse_size(n.Scalar()) : std::nullopt;
        if (!v) {
            error(n, join(where, key), "expected a size such as 64KiB or 32MiB (" + range + "), got '" + got + "'");
            return;
        }
        if (!(zero_is_off && *v == 0) && (*v < min || *v > max)) {
            error(n, join(where, key), "'" + got + "' is out of range: expected " + range);
            return;
        }
        out = *v;
    }

    // The largest unit that divides exactly: 30d, 5m, 100ms.
    static std::string format_ms(int64_t ms) {
        for (auto [unit, div] : {std::pair{"d", 86'400'000LL}, {"h", 3'600'000LL}, {"m", 60'000LL}, {"s", 1'000LL}})
            if (ms >= div && ms % div == 0) return std::to_string(ms / div) + unit;
        return std::to_string(ms) + "ms";
    }
    static std::string format_bytes(uint64_t b) {
        for (auto [unit, div] : {std::pair{"GiB", 1ULL << 30}, {"MiB", 1ULL << 20}, {"KiB", 1ULL << 10}})
            if (b >= div && b % div == 0) return std::to_string(b / div) + unit;
        return std::to_string(b) + "B";
    }

    void integer(const YAML::Node& parent, const std::string& where, const char* key, int& out, int lo, int hi) {
        const YAML::Node n = parent[key];
        if (!n) return;
        int v = 0;
        bool ok = n.IsScalar();
        try {
            if (ok) v = n.as<int>();
        } catch (const YAML::Exception&) {
            ok = false;
        }
        if (!ok || v < lo || v > hi) {
            error(n, join(where, key), "expected an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
            return;
        }
        out = v;
    }

    bool string_list(const YAML::Node& n, const std::string& key, std::vector<std::string>& out) {
        if (!n.IsSequence()) {
            error(n, key, "expected a list of strings");
            return false;
        }
        std::vector<std::string> v;
        for (const auto& item : n) {
            if (!item.IsScalar() || item.Scalar().empty()) {
                error(item, key, "expected a non-empty string in the list");
                return false;
            }
            v.push_back(item.Scalar());
        }
        out = std::move(v);
        return true;
    }

private:
    std::string file_;
    std::vector<ConfigError>& errors_;
};

}  // namespace jobtrail::config
