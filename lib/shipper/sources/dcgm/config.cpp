#include "shipper/sources/dcgm/config.hpp"

#include <array>

#include "config/yaml_parser.hpp"

namespace jobtrail::shipper {
namespace {

using config::kMin;
using config::kMs;
using config::kSec;

void address(config::Parser& p, const YAML::Node& n, const std::string& w, const char* key, DcgmConfig& c) {
    std::string v = c.client.address;
    p.string(n, w, key, v);
    // A relative socket path would be resolved against the shipper's working directory.
    if (v.starts_with("unix:") && (v.size() == 5 || v[5] != '/'))
        p.error(n[key], config::Parser::join(w, key), "expected unix:/absolute/path or host[:port], got '" + v + "'");
    else
        c.client.address = v;
}

void libraries(config::Parser& p, const YAML::Node& n, const std::string& w, const char* key, DcgmConfig& c) {
    const YAML::Node l = n[key];
    if (!l) return;
    const std::string k = config::Parser::join(w, key);
    std::vector<std::string> v;
    if (!p.string_list(l, k, v)) return;
    if (v.empty()) {
        p.error(l, k, "empty: list the libraries to try (libdcgm.so.4, libdcgm.so.3), or remove the key");
        return;
    }
    for (size_t i = 0; i < v.size(); ++i)
        // dlopen reads a name with a '/' as a path from the working directory; a bare name is
        // looked up by the dynamic loader.
        if (v[i].find('/') != std::string::npos && v[i][0] != '/') {
            p.error(l[i], k + "[" + std::to_string(i) + "]",
                    "expected a library name (libdcgm.so.4) or an absolute path, got '" + v[i] + "'");
            return;
        }
    c.client.libraries = std::move(v);
}

// Each option once: its key, and how it is read into the config.
struct Option {
    const char* key;
    void (*parse)(config::Parser&, const YAML::Node&, const std::string&, const char*, DcgmConfig&);
};
constexpr std::array<Option, 7> kOptions = {{
    {"enabled", [](auto& p, const auto& n, const auto& w, auto k, auto& c) { p.boolean(n, w, k, c.enabled); }},
    {"address", address},
    {"libraries", libraries},
    {"health_interval", [](auto& p, const auto& n, const auto& w, auto k,
                           auto& c) { p.duration(n, w, k, c.health_interval_ms, kSec, 60 * kMin); }},
    {"call_timeout",
     [](auto& p, const auto& n, const auto& w, auto k, auto& c) {
         int64_t ms = c.client.call_timeout_ms;
         p.duration(n, w, k, ms, 100 * kMs, kMin);
         c.client.call_timeout_ms = static_cast<int>(ms);
     }},
    {"queue_size",
     [](auto& p, const auto& n, const auto& w, auto k, auto& c) { p.integer(n, w, k, c.queue_size, 16, 65536); }},
    {"job", [](auto& p, const auto& n, const auto& w, auto k, auto& c) { p.string(n, w, k, c.job); }},
}};

}  // namespace

void DcgmKind::parse(config::Parser& p, const YAML::Node& sources, const std::string& where, Config& out) {
    const std::string w = where + "." + kName;
    const YAML::Node n = sources[kName];
    if (!n) return;
    std::array<const char*, kOptions.size()> keys{};
    for (size_t i = 0; i < kOptions.size(); ++i) keys[i] = kOptions[i].key;
    if (!p.check_map(n, w, keys)) return;
    for (const auto& o : kOptions) o.parse(p, n, w, o.key, out);
}

}  // namespace jobtrail::shipper
