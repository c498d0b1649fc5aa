#include "devices/gpus.hpp"

#include <dirent.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>

#include "common/fs.hpp"
#include "common/text.hpp"

namespace jobtrail::devices {
namespace {

constexpr size_t kMaxGpus = 64;
constexpr size_t kMaxIndices = 256;

bool parse_int(std::string_view s, int& out) {
    s = trim(s);
    if (s.empty() || s.size() > 7) return false;
    const auto r = std::from_chars(s.data(), s.data() + s.size(), out);
    return r.ec == std::errc() && r.ptr == s.data() + s.size() && out >= 0;
}

bool is_hex(std::string_view s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isxdigit(c) != 0; });
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t from = 0;
    for (;;) {
        const size_t at = s.find(sep, from);
        out.push_back(s.substr(from, at == std::string_view::npos ? std::string_view::npos : at - from));
        if (at == std::string_view::npos) return out;
        from = at + 1;
    }
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

}  // namespace

std::optional<GpuInfo> parse_nvidia_information(std::string_view text) {
    GpuInfo g;
    bool minor = false;
    for (auto line : split(text, '\n')) {
        const size_t colon = line.find(':');
        if (colon == std::string_view::npos) continue;
        const auto key = trim(line.substr(0, colon));
        const auto value = trim(line.substr(colon + 1));
        if (key == "Device Minor") {
            minor = parse_int(value, g.minor);
        } else if (key == "Bus Location") {
            if (!bdf_key(value).empty()) g.bdf = lower(value);
        } else if (key == "GPU UUID") {
            g.uuid = std::string(utf8_prefix(value, 64));
        } else if (key == "Model") {
            g.model = std::string(utf8_prefix(value, 96));
        }
    }
    if (!minor || g.bdf.empty()) return std::nullopt;
    return g;
}

std::vector<GpuInfo> read_nvidia_gpus(const std::string& root, std::string& note) {
    std::vector<GpuInfo> out;
    const std::string dir = root + "/gpus";
    DIR* d = ::opendir(dir.c_str());
    if (!d) {
        note = "no GPU list at " + dir + " (" + errno_text(errno) + ")";
        return out;
    }
    std::vector<std::string> unreadable;
    while (const dirent* e = ::readdir(d)) {
        const std::string name = e->d_name;
        if (name[0] == '.') continue;
        if (out.size() >= kMaxGpus) {
            note = "more than " + std::to_string(kMaxGpus) + " GPUs under " + dir + "; the rest ignored";
            break;
        }
        const auto text = read_small_file(dir + "/" + name + "/information", 8192);
        auto g = text ? parse_nvidia_information(*text) : std::nullopt;
        if (g) {
            out.push_back(std::move(*g));
        } else {
            unreadable.push_back(name);
        }
    }
    ::closedir(d);
    std::sort(out.begin(), out.end(), [](const GpuInfo& a, const GpuInfo& b) { return a.minor < b.minor; });
    if (!unreadable.empty()) {
        std::sort(unreadable.begin(), unreadable.end());
        std::string names;
        for (const auto& n : unreadable) names += (names.empty() ? "" : ",") + logfmt_value(n);
        note += (note.empty() ? "" : "; ") + std::string("unreadable driver entries: ") + names;
    }
    return out;
}

std::optional<std::vector<int>> parse_index_list(std::string_view s) {
    std::vector<int> out;
    s = trim(s);
    if (s.empty()) return out;
    for (auto part : split(s, ',')) {
        const size_t dash = part.find('-');
        int lo = 0, hi = 0;
        if (dash == std::string_view::npos) {
            if (!parse_int(part, lo)) return std::nullopt;
            hi = lo;
        } else if (!parse_int(part.substr(0, dash), lo) || !parse_int(part.substr(dash + 1), hi) || hi < lo) {
            return std::nullopt;
        }
        if (static_cast<size_t>(hi - lo) >= kMaxIndices) return std::nullopt;
        for (int i = lo; i <= hi; ++i) {
            if (out.size() >= kMaxIndices) return std::nullopt;
            if (std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
        }
    }
    return out;
}

std::string bdf_key(std::string_view bdf) {
    // [domain:]bus:slot[.function], hex
    auto parts = split(trim(bdf), ':');
    if (parts.size() == 2) parts.insert(parts.begin(), std::string_view("0000"));
    if (parts.size() != 3) return {};
    std::string_view domain = parts[0], bus = parts[1], slot = parts[2];
    if (const size_t dot = slot.find('.'); dot != std::string_view::npos) {
        const auto fn = slot.substr(dot + 1);
        if (fn.size() != 1 || fn[0] < '0' || fn[0] > '7') return {};
        slot = slot.substr(0, dot);
    }
    if (domain.size() == 8 && domain.substr(0, 4) == "0000") domain = domain.substr(4);
    if (domain.size() != 4 || bus.size() != 2 || slot.size() != 2 || !is_hex(domain) || !is_hex(bus) || !is_hex(slot))
        return {};
    return lower(domain) + ":" + lower(bus) + ":" + lower(slot);
}

std::map<std::string, std::string> serials_from_smi_csv(const std::vector<std::string>& lines) {
    std::map<std::string, std::string> out;
    int bus_col = -1, serial_col = -1;
    for (const auto& line : lines) {
        const auto cols = split(line, ',');
        if (bus_col < 0) {  // the header: "index, pci.bus_id, serial, ..."
            for (size_t i = 0; i < cols.size(); ++i) {
                const auto name = trim(cols[i]);
                if (name == "pci.bus_id") bus_col = static_cast<int>(i);
                if (name == "serial") serial_col = static_cast<int>(i);
            }
            if (bus_col < 0 || serial_col < 0) return out;
            continue;
        }
        if (cols.size() <= static_cast<size_t>(std::max(bus_col, serial_col))) continue;
        const auto key = bdf_key(cols[static_cast<size_t>(bus_col)]);
        const auto serial = trim(cols[static_cast<size_t>(serial_col)]);
        if (key.empty() || serial.empty() || serial.size() > 64 || serial == "[N/A]" ||
            !std::all_of(serial.begin(), serial.end(), [](unsigned char c) { return std::isalnum(c) || c == '-'; }))
            continue;
        out[key] = std::string(serial);
        if (out.size() >= kMaxGpus) break;
    }
    return out;
}

std::vector<std::string> expand_file_list(std::string_view s) {
    std::vector<std::string> out;
    s = trim(s);
    // Split at commas outside brackets.
    std::vector<std::string_view> parts;
    int depth = 0;
    size_t from = 0;
    for (size_t i = 0; i <= s.size(); ++i) {
        if (i < s.size() && s[i] == '[') ++depth;
        if (i < s.size() && s[i] == ']') --depth;
        if (depth < 0 || depth > 1) return {};
        if (i == s.size() || (s[i] == ',' && depth == 0)) {
            parts.push_back(s.substr(from, i - from));
            from = i + 1;
        }
    }
    for (auto p : parts) {
        const size_t open = p.find('[');
        if (open == std::string_view::npos) {
            if (p.empty() || out.size() >= kMaxIndices) return {};
            out.emplace_back(p);
            continue;
        }
        const size_t close = p.find(']', open);
        if (close == std::string_view::npos || p.find('[', open + 1) < close) return {};
        const auto prefix = p.substr(0, open), suffix = p.substr(close + 1);
        for (auto r : split(p.substr(open + 1, close - open - 1), ',')) {
            const size_t dash = r.find('-');
            int lo = 0, hi = 0;
            if (!parse_int(r.substr(0, dash), lo)) return {};
            hi = lo;
            if (dash != std::string_view::npos && (!parse_int(r.substr(dash + 1), hi) || hi < lo)) return {};
            const size_t width = dash == std::string_view::npos ? r.size() : dash;  // zero padding kept
            for (int i = lo; i <= hi; ++i) {
                if (out.size() >= kMaxIndices) return {};
                std::string n = std::to_string(i);
                if (n.size() < width) n.insert(0, width - n.size(), '0');
                out.push_back(std::string(prefix) + n + std::string(suffix));
            }
        }
    }
    return out;
}

std::map<int, std::string> parse_gres_gpu_files(const std::vector<std::string>& lines, std::string* why) {
    // Slurm numbers a node's GPU device files 0, 1, ... in the order slurmd lists its GRES
    // records (gres.conf's order; sorted by file and links with AutoDetect), each file of a record
    // one position. "Index=" is not that position: it is the number File= ends in (4 for
    // /dev/nvidia4, 0 for /dev/nvidia[4-6]). A record we cannot read ends the mapping there: a
    // position past it could name another job's GPU, and an Xid node-wide is better than blamed.
    std::map<int, std::string> out;
    const auto stop = [&](std::string reason) {
        if (why) *why = std::move(reason);
        return out;
    };
    int position = 0;
    for (const auto& line : lines) {
        std::string_view name, file, count, flags;
        bool gres = false;
        for (auto w : split(line, ' ')) {
            if (w == "Gres") gres = true;
            if (w.substr(0, 5) == "Name=") name = w.substr(5);
            if (w.substr(0, 6) == "Count=") count = w.substr(6);
            if (w.substr(0, 5) == "File=") file = w.substr(5);
            if (w.substr(0, 6) == "Flags=") flags = w.substr(6);
        }
        if (!gres || name != "gpu") continue;
        if (flags.find("MIG") != std::string_view::npos)
            return stop("a MIG slice (its GPU cannot be mapped to a device file here)");
        if (file.empty() || file == "(null)")
            return stop(
                "slurmd -G named no device file for a GPU record (Slurm 23.02 and later print files "
                "only with DebugFlags=GRES)");
        const auto files = expand_file_list(file);
        int n = 0;
        // MultipleFiles (several files, one GPU) also has a count that is not its number of files.
        if (files.empty() || !parse_int(count, n) || n != static_cast<int>(files.size()))
            return stop("a GPU record of " + std::string(count) + " devices in " + std::to_string(files.size()) +
                        " files");
        for (const auto& f : files) {
            if (out.size() >= kMaxIndices) return stop("more than " + std::to_string(kMaxIndices) + " GPUs");
            out.emplace(position++, f);
        }
    }
    return out;
}

Resolution resolve_job_gpus(std::string_view job_gpus, const std::map<int, int>& index_to_minor,
                            const std::vector<GpuInfo>& gpus, const std::map<std::string, std::string>& serials) {
    Resolution r;
    if (trim(job_gpus).empty()) return r;  // a job without GPUs: nothing missing
    const auto indices = parse_index_list(job_gpus);
    if (!indices) {
        r.note = "SLURM_JOB_GPUS=" + logfmt_value(utf8_prefix(job_gpus, 64)) + " is not an index list";
        return r;
    }
    std::string unmapped, missing;
    for (int i : *indices) {
        const auto m = index_to_minor.find(i);
        if (m == index_to_minor.end()) {
            unmapped += (unmapped.empty() ? "" : ",") + std::to_string(i);
            continue;
        }
        const auto it = std::find_if(gpus.begin(), gpus.end(), [&](const GpuInfo& g) { return g.minor == m->second; });
        if (it == gpus.end()) {
            missing += (missing.empty() ? "" : ",") + std::to_string(m->second);
            continue;
        }
        node::JobDevice d{"gpu", m->second, it->bdf, it->uuid, {}};
        if (auto s = serials.find(bdf_key(it->bdf)); s != serials.end()) d.serial = s->second;
        r.devices.push_back(std::move(d));
    }
    if (!unmapped.empty()) r.note = "no device file known for Slurm GPU index " + unmapped;
    if (!missing.empty())
        r.note += (r.note.empty() ? "" : "; ") + std::string("the driver lists no GPU with minor ") + missing;
    return r;
}

std::string describe(const node::JobDevice& d) {
    std::string s = (d.kind == "gpu" ? "GPU " : d.kind + " ") + std::to_string(d.index) + " (" + d.bdf;
    if (!d.serial.empty()) s += ", serial " + d.serial;
    return s + ")";
}

}  // namespace jobtrail::devices
