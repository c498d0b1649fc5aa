#include "dcgm/convert.hpp"

#include <array>
#include <cstring>
#include <memory>
#include <utility>

#include "dcgm/api.hpp"

namespace jobtrail::dcgm {
namespace {

// dcgm_errors.h dcgmError_t: the codes DCGM's health watches report, with 4.x's names (the
// numbers are the same in 3.x, where 10, 12 and 43 were CLOCK_THROTTLE_THERMAL,
// CLOCK_THROTTLE_POWER and THROTTLING_VIOLATION).
constexpr std::array<std::pair<unsigned, const char*>, 46> kCodes = {{
    {3, "DCGM_FR_PCI_REPLAY_RATE"},
    {4, "DCGM_FR_VOLATILE_DBE_DETECTED"},
    {5, "DCGM_FR_VOLATILE_SBE_DETECTED"},
    {6, "DCGM_FR_PENDING_PAGE_RETIREMENTS"},
    {7, "DCGM_FR_RETIRED_PAGES_LIMIT"},
    {8, "DCGM_FR_RETIRED_PAGES_DBE_LIMIT"},
    {9, "DCGM_FR_CORRUPT_INFOROM"},
    {10, "DCGM_FR_CLOCKS_EVENT_THERMAL"},
    {11, "DCGM_FR_POWER_UNREADABLE"},
    {12, "DCGM_FR_CLOCKS_EVENT_POWER"},
    {13, "DCGM_FR_NVLINK_ERROR_THRESHOLD"},
    {14, "DCGM_FR_NVLINK_DOWN"},
    {15, "DCGM_FR_NVSWITCH_FATAL_ERROR"},
    {16, "DCGM_FR_NVSWITCH_NON_FATAL_ERROR"},
    {17, "DCGM_FR_NVSWITCH_DOWN"},
    {19, "DCGM_FR_NVML_API"},
    {27, "DCGM_FR_FIELD_QUERY"},
    {29, "DCGM_FR_PERSISTENCE_MODE"},
    {40, "DCGM_FR_THERMAL_VIOLATIONS"},
    {41, "DCGM_FR_THERMAL_VIOLATIONS_TS"},
    {42, "DCGM_FR_TEMP_VIOLATION"},
    {43, "DCGM_FR_CLOCKS_EVENT_VIOLATION"},
    {45, "DCGM_FR_PCIE_GENERATION"},
    {46, "DCGM_FR_PCIE_WIDTH"},
    {70, "DCGM_FR_NVLINK_CRC_ERROR_THRESHOLD"},
    {71, "DCGM_FR_NVLINK_ERROR_CRITICAL"},
    {72, "DCGM_FR_ENFORCED_POWER_LIMIT"},
    {80, "DCGM_FR_ROW_REMAP_FAILURE"},
    {81, "DCGM_FR_UNCONTAINED_ERROR"},
    {83, "DCGM_FR_DBE_PENDING_PAGE_RETIREMENTS"},
    {84, "DCGM_FR_UNCORRECTABLE_ROW_REMAP"},
    {85, "DCGM_FR_PENDING_ROW_REMAP"},
    {88, "DCGM_FR_NVSWITCH_NVLINK_DOWN"},
    {98, "DCGM_FR_PCIE_H_REPLAY_VIOLATION"},
    {99, "DCGM_FR_GPU_EXPECTED_NVLINKS_UP"},
    {100, "DCGM_FR_NVSWITCH_EXPECTED_NVLINKS_UP"},
    {101, "DCGM_FR_XID_ERROR"},
    {103, "DCGM_FR_DBE_VIOLATION"},
    {104, "DCGM_FR_PCIE_REPLAY_VIOLATION"},
    {109, "DCGM_FR_SXID_ERROR"},
    {118, "DCGM_FR_SRAM_THRESHOLD"},
    {119, "DCGM_FR_NVLINK_EFFECTIVE_BER_THRESHOLD"},
    {120, "DCGM_FR_FALLEN_OFF_BUS"},
    {121, "DCGM_FR_NVLINK_SYMBOL_BER_THRESHOLD"},
    {131, "DCGM_FR_CONTAINED_ERROR"},
    {132, "DCGM_FR_UNCORRECTABLE_ROW_REMAP_LIMIT"},
}};

// dcgm_structs.h dcgmHealthSystems_t: one name per bit (both NvSwitch bits are "nvswitch";
// CONNECTX is 4.x only), and DCGM_HEALTH_WATCH_ALL, under which DCGM files incidents from Xids
// (modules/health/DcgmHealthWatch.cpp, 4.x).
constexpr std::array<std::pair<unsigned, const char*>, 14> kSystems = {{
    {0x1, "pcie"},
    {0x2, "nvlink"},
    {0x4, "pmu"},
    {0x8, "mcu"},
    {0x10, "mem"},
    {0x20, "sm"},
    {0x40, "inforom"},
    {0x80, "thermal"},
    {0x100, "power"},
    {0x200, "driver"},
    {0x400, "nvswitch"},
    {0x800, "nvswitch"},
    {0x1000, "connectx"},
    {api::kHealthWatchAll, "all"},
}};

// dcgmPolicyConditionDbe_t's location enum.
constexpr std::array<const char*, 5> kLocations = {"l1", "l2", "device", "register", "texture"};

std::string hex(unsigned v) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string out;
    do {
        out.insert(out.begin(), kDigits[v & 0xf]);
        v >>= 4;
    } while (v);
    return "0x" + out;
}

// A fixed-size char field that DCGM should have terminated: up to the first NUL, or all of it.
std::string field(const char* p, size_t n) {
    return std::string(p, strnlen(p, n));
}

// The struct in `data` when `size` is its size and its version field the expected one: copied
// out, so the caller's bytes need no alignment.
template <class T>
std::unique_ptr<T> copy_checked(const void* data, size_t size, unsigned version, const char* what, std::string& error) {
    if (data == nullptr || size != sizeof(T)) {
        error = std::string(what) + ": " + std::to_string(size) + " bytes, expected " + std::to_string(sizeof(T));
        return nullptr;
    }
    auto out = std::make_unique<T>();
    std::memcpy(out.get(), data, sizeof(T));
    if (out->version != version) {
        error = std::string(what) + ": version " + hex(out->version) + ", expected " + hex(version);
        return nullptr;
    }
    return out;
}

template <class R>
std::optional<Event> violation(const R& r, unsigned gpu, std::string& error) {
    Event e;
    e.gpu = gpu;
    auto set = [&e](Kind kind, long long ts, int64_t value, int64_t value2 = 0) {
        e.kind = kind;
        e.ts_us = ts;
        e.value = value;
        e.value2 = value2;
    };
    const auto& v = r.val;
    switch (r.condition) {
        case api::kCondXid:
            set(Kind::kXid, v.xid.timestamp, v.xid.errnum);
            break;
        case api::kCondDbe: {
            set(Kind::kDbe, v.dbe.timestamp, v.dbe.numerrors);
            const auto loc = static_cast<unsigned>(v.dbe.location);
            e.detail = loc < kLocations.size() ? kLocations[loc] : "location_" + std::to_string(loc);
            break;
        }
        case api::kCondPci:
            set(Kind::kPcie, v.pci.timestamp, v.pci.counter);
            break;
        case api::kCondMaxPagesRetired:
            set(Kind::kRetiredPages, v.mpr.timestamp, v.mpr.sbepages, v.mpr.dbepages);
            break;
        case api::kCondThermal:
            set(Kind::kThermal, v.thermal.timestamp, v.thermal.thermalViolation);
            break;
        case api::kCondPower:
            set(Kind::kPower, v.power.timestamp, v.power.powerViolation);
            break;
        case api::kCondNvlink:
            set(Kind::kNvlink, v.nvlink.timestamp, v.nvlink.counter, v.nvlink.fieldId);
            break;
        default:
            error = "policy callback: condition " + hex(r.condition) + " is not one known condition bit";
            return std::nullopt;
    }
    return e;
}

template <class H>
std::optional<std::vector<Incident>> health(const void* data, size_t size, unsigned version, std::string& error) {
    const auto r = copy_checked<H>(data, size, version, "health response", error);
    if (!r) return std::nullopt;
    size_t count = r->incidentCount;
    if (count > std::size(r->incidents)) {
        error = "health response: " + std::to_string(count) + " incidents, at most " +
                std::to_string(std::size(r->incidents)) + " fit";
        count = std::size(r->incidents);
    }
    std::vector<Incident> out;
    for (size_t i = 0; i < count; ++i) {
        const auto& in = r->incidents[i];
        if (in.entityInfo.entityGroupId != api::kEntityGpu || in.health == api::kHealthResultPass) continue;
        out.push_back({.gpu = in.entityInfo.entityId,
                       .code = fr_name(in.error.code),
                       .system = system_name(in.system),
                       .health = in.health == api::kHealthResultFail   ? "fail"
                                 : in.health == api::kHealthResultWarn ? "warn"
                                                                       : "health_" + std::to_string(in.health),
                       .message = field(in.error.msg, sizeof in.error.msg)});
    }
    return out;
}

}  // namespace

std::string fr_name(unsigned code) {
    for (const auto& [n, name] : kCodes)
        if (n == code) return name;
    return "DCGM_FR_" + std::to_string(code);
}

std::string system_name(unsigned bits) {
    for (const auto& [bit, name] : kSystems)
        if (bit == bits) return name;
    return "system_" + hex(bits);
}

std::optional<Event> convert_violation(const void* response, size_t size, int major, unsigned gpu, std::string& error) {
    if (major == 4) {
        const auto r = copy_checked<api::PolicyCallbackResponseV2>(response, size, api::kPolicyCallbackResponseVersion2,
                                                                   "policy callback", error);
        return r ? violation(*r, r->gpuId, error) : std::nullopt;
    }
    const auto r = copy_checked<api::PolicyCallbackResponseV1>(response, size, api::kPolicyCallbackResponseVersion1,
                                                               "policy callback", error);
    return r ? violation(*r, gpu, error) : std::nullopt;
}

std::optional<std::vector<Incident>> convert_health(const void* response, size_t size, int major, std::string& error) {
    if (major == 4) return health<api::HealthResponseV5>(response, size, api::kHealthResponseVersion5, error);
    return health<api::HealthResponseV4>(response, size, api::kHealthResponseVersion4, error);
}

}  // namespace jobtrail::dcgm
