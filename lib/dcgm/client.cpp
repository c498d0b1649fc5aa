#include "dcgm/client.hpp"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <utility>

#include "dcgm/api.hpp"
#include "dcgm/callbacks.hpp"
#include "dcgm/convert.hpp"
#include "dcgm/engine_owner.hpp"
#include "dcgm/library.hpp"
#include "dcgm/worker.hpp"

namespace jobtrail::dcgm {
namespace {

// The retired-pages condition's threshold (pages, single- and double-bit together): near the 64
// pages a GPU with page retirement can retire.
constexpr unsigned long long kRetiredPagesLimit = 60;

struct Registration {
    api::GroupId group = api::kGroupAllGpus;
    bool own_group = false;  // 3.x: a group made for one GPU, destroyed with the registration
    unsigned mask = 0;
    uint64_t ticket = 0;
};

// A GPU as the policy needs it: its thresholds from its attributes (0: unknown).
struct GpuFacts {
    unsigned slowdown_c = 0, power_limit_w = 0;
    bool lost = false;  // DCGM_ST_GPU_IS_LOST: in no group of ours
};

// DCGM's placeholder for a bus id, shown as DCGM gave it: printable ASCII, bounded.
std::string shown(const std::string& s) {
    std::string out;
    for (const char c : s)
        if (c >= 0x20 && c < 0x7f && out.size() < 32) out += c;
    return out.empty() ? "empty" : "\"" + out + "\"";
}

unsigned valid(unsigned v) {
    return v == 0 || v >= api::kInt32Blank ? 0 : v;
}

class RealClient final : public Client {
public:
    explicit RealClient(ClientOptions options) : options_(std::move(options)) {}
    ~RealClient() override { disconnect(); }

    bool connect(std::string& error) override {
        std::lock_guard lock(mu_);
        if (worker_.stuck()) {
            error = "an earlier DCGM call has not returned yet";
            return false;
        }
        if (!lib_ && !load(error)) return false;
        close();
        // Named copies, not a structured binding: the call's lambda captures them.
        const auto parsed = parse_address();
        const std::string address = parsed.first;
        const bool unix_socket = parsed.second;
        if (const std::string why = untrusted_holder(address, unix_socket); !why.empty()) {
            error = "not connecting to " + std::string(unix_socket ? "unix:" : "") + address + ": " + why;
            return false;
        }
        api::ConnectV2Params params{api::kConnectV2ParamsVersion2, 0, static_cast<unsigned>(options_.call_timeout_ms),
                                    unix_socket ? 1U : 0U};
        auto handle = std::make_shared<api::Handle>(0);
        const auto fn = lib_->connect;
        const auto rc = call(
            std::string("dcgmConnect_v2(") + (unix_socket ? "unix:" : "") + address + ")",
            [fn, address, params, handle]() mutable { return fn(address.c_str(), &params, handle.get()); }, error);
        if (rc != api::kOk) return false;
        handle_ = *handle;
        connected_ = true;
        lost_ = false;
        health_set_ = false;
        return true;
    }

    std::string library() const override {
        std::lock_guard lock(mu_);
        return lib_ ? lib_->name + " (DCGM " + std::to_string(lib_->major) + ".x API)" : "";
    }

    std::vector<Gpu> gpus(std::string& error) override {
        std::lock_guard lock(mu_);
        return list_gpus(error) ? gpus_ : std::vector<Gpu>{};
    }

    bool watch_violations(std::function<void(Event)> sink, std::string& error) override {
        std::lock_guard lock(mu_);
        if (!usable(error) || !list_gpus(error)) return false;
        unregister();
        if (lib_->major == 4) {
            std::vector<GpuFacts> all;
            for (const auto& g : gpus_) all.push_back(facts_[g.id]);
            const api::Policy policy = make_policy(all);
            callbacks::Target target{sink, 4, 0, bdfs()};
            Registration reg{api::kGroupAllGpus, false, policy.condition, callbacks::add(std::move(target))};
            registrations_.push_back(reg);
            return set_and_register(reg, policy, nullptr, error);
        }
        for (const auto& g : gpus_) {
            if (facts_[g.id].lost) continue;
            const api::Policy policy = make_policy({facts_[g.id]});
            auto slot = callbacks::add3({sink, 3, g.id, bdfs()});
            if (!slot) {
                error = "more than " + std::to_string(api::kMaxNumDevices) + " DCGM registrations in this process";
                return false;
            }
            Registration reg{0, true, policy.condition, slot->first};
            if (!make_group(g.id, reg.group, error)) {
                callbacks::remove(reg.ticket);
                return false;
            }
            registrations_.push_back(reg);
            if (!set_and_register(reg, policy, slot->second, error)) return false;
        }
        return true;
    }

    std::optional<std::vector<Incident>> health(std::string& error) override {
        std::lock_guard lock(mu_);
        if (!usable(error)) return std::nullopt;
        const auto h = handle_;
        if (!health_set_) {
            const auto fn = lib_->health_set;
            if (call(
                    "dcgmHealthSet", [fn, h] { return fn(h, api::kGroupAllGpus, api::kHealthWatchAll); }, error) !=
                api::kOk)
                return std::nullopt;
            health_set_ = true;
        }
        const bool v5 = lib_->major == 4;
        const size_t size = v5 ? sizeof(api::HealthResponseV5) : sizeof(api::HealthResponseV4);
        const unsigned version = v5 ? api::kHealthResponseVersion5 : api::kHealthResponseVersion4;
        auto buffer = std::make_shared<std::vector<unsigned char>>(size);
        std::memcpy(buffer->data(), &version, sizeof version);
        const auto fn = lib_->health_check;
        if (call(
                "dcgmHealthCheck", [fn, h, buffer] { return fn(h, api::kGroupAllGpus, buffer->data()); }, error) !=
            api::kOk)
            return std::nullopt;
        std::string problem;
        auto incidents = convert_health(buffer->data(), size, lib_->major, problem);
        if (!incidents) error = problem;
        return incidents;
    }

    void disconnect() override {
        std::lock_guard lock(mu_);
        close();
    }

private:
    bool load(std::string& error) {
        std::string why;
        lib_ = load_library(options_.libraries, why);
        if (!lib_) {
            error = why;
            return false;
        }
        const auto fn = lib_->init;
        if (call(
                "dcgmInit", [fn] { return fn(); }, error) != api::kOk) {
            lib_ = nullptr;  // stays loaded (never dlclosed); tried again on the next connect
            return false;
        }
        return true;
    }

    std::pair<std::string, bool> parse_address() const {
        const std::string& a = options_.address;
        if (a.empty()) return {"127.0.0.1", false};
        if (a.rfind("unix:", 0) == 0) return {a.substr(5), true};
        return {a, false};
    }

    // One DCGM call on the worker, bounded by call_timeout_ms. A timeout or a dead connection
    // marks the connection lost (the caller reconnects).
    api::Return call(const std::string& what, std::function<api::Return()> fn, std::string& error) {
        auto rc = std::make_shared<api::Return>(api::kGenericError);
        if (!worker_.run([rc, fn = std::move(fn)] { *rc = fn(); }, options_.call_timeout_ms)) {
            lost_ = true;
            error = what + ": no answer within " + std::to_string(options_.call_timeout_ms) + " ms";
            return api::kTimeout;
        }
        if (*rc == api::kConnectionNotValid) lost_ = true;
        if (*rc != api::kOk) error = what + ": " + lib_->describe(*rc);
        return *rc;
    }

    bool usable(std::string& error) {
        if (!connected_)
            error = "not connected to DCGM";
        else if (lost_)
            error = "the connection to DCGM was lost";
        return connected_ && !lost_;
    }

    bool list_gpus(std::string& error) {
        if (!usable(error)) return false;
        const auto h = handle_;
        auto ids = std::make_shared<std::array<unsigned, api::kMaxNumDevices>>();
        auto count = std::make_shared<int>(0);
        const auto devices = lib_->devices;
        if (call(
                "dcgmGetAllSupportedDevices", [devices, h, ids, count] { return devices(h, ids->data(), count.get()); },
                error) != api::kOk)
            return false;
        const int n = std::clamp(*count, 0, static_cast<int>(api::kMaxNumDevices));
        std::vector<Gpu> out;
        facts_.clear();  // this engine's GPUs only: ids an earlier engine listed are gone
        for (int i = 0; i < n; ++i) {
            const unsigned id = (*ids)[i];
            auto attr = std::make_shared<api::DeviceAttributes>();
            attr->version = api::kDeviceAttributesVersion3;
            const auto fn = lib_->attributes;
            std::string why;
            const auto rc = call(
                "dcgmGetDeviceAttributes(" + std::to_string(id) + ")",
                [fn, h, id, attr] { return fn(h, id, attr.get()); }, why);
            if (rc == api::kGpuIsLost) {
                // Lost from the bus since DCGM listed it: said, and left out of our groups (DCGM
                // refuses a policy on a group holding it), not the end of every other GPU's events.
                out.push_back({id, "", why});
                facts_[id] = {0, 0, true};
                continue;
            }
            if (rc != api::kOk) {
                error = why;
                return false;
            }
            const auto& ident = attr->identifiers;
            std::string bdf(ident.pciBusId, strnlen(ident.pciBusId, sizeof ident.pciBusId));
            std::string problem;
            if (bdf.empty() || bdf.starts_with("<<<")) {
                // DCGM_STR_BLANK ("<<<NULL>>>") and its kin: DCGM has no value, not an address.
                problem = "DCGM has no PCI bus id for GPU " + std::to_string(id) + " (" + shown(bdf) + ")";
                bdf.clear();
            }
            out.push_back({id, std::move(bdf), std::move(problem)});
            facts_[id] = {valid(attr->thermalSettings.slowdownTemp), valid(attr->powerLimits.enforcedPowerLimit)};
        }
        gpus_ = std::move(out);
        return true;
    }

    std::map<unsigned, std::string> bdfs() const {
        std::map<unsigned, std::string> out;
        for (const auto& g : gpus_) out[g.id] = g.pci_bdf;
        return out;
    }

    // Every condition; thermal and power at the lowest slowdown temperature and enforced power
    // limit of the GPUs (left out when none is known).
    static api::Policy make_policy(const std::vector<GpuFacts>& gpus) {
        api::Policy p{};
        p.version = api::kPolicyVersion1;
        unsigned slowdown = 0, power = 0;
        for (const auto& g : gpus) {
            if (g.slowdown_c && (!slowdown || g.slowdown_c < slowdown)) slowdown = g.slowdown_c;
            if (g.power_limit_w && (!power || g.power_limit_w < power)) power = g.power_limit_w;
        }
        auto boolean = [&](unsigned bit, size_t idx) {
            p.condition |= bit;
            p.parms[idx].tag = api::PolicyConditionParams::kBool;
            p.parms[idx].val.boolean = 1;
        };
        auto number = [&](unsigned bit, size_t idx, unsigned long long v) {
            if (!v) return;
            p.condition |= bit;
            p.parms[idx].tag = api::PolicyConditionParams::kLlong;
            p.parms[idx].val.llval = v;
        };
        // Indices: DCGM_POLICY_COND_IDX_* (DBE 0, PCI 1, MAX_PAGES_RETIRED 2, THERMAL 3, POWER 4, NVLINK 5, XID 6).
        boolean(api::kCondDbe, 0);
        boolean(api::kCondPci, 1);
        number(api::kCondMaxPagesRetired, 2, kRetiredPagesLimit);
        number(api::kCondThermal, 3, slowdown);
        number(api::kCondPower, 4, power);
        boolean(api::kCondNvlink, 5);
        boolean(api::kCondXid, 6);
        return p;
    }

    bool make_group(unsigned gpu, api::GroupId& group, std::string& error) {
        const auto h = handle_;
        auto id = std::make_shared<api::GroupId>(0);
        const auto create = lib_->group_create;
        const std::string name = "jobtrail-gpu" + std::to_string(gpu);
        if (call(
                "dcgmGroupCreate",
                [create, h, name, id] { return create(h, api::kGroupEmpty, name.c_str(), id.get()); },
                error) != api::kOk)
            return false;
        group = *id;
        const auto add = lib_->group_add;
        const auto g = group;
        if (call(
                "dcgmGroupAddDevice", [add, h, g, gpu] { return add(h, g, gpu); }, error) == api::kOk)
            return true;
        const auto destroy = lib_->group_destroy;
        if (!lost_)
            call(
                "dcgmGroupDestroy", [destroy, h, g] { return destroy(h, g); }, error);
        return false;
    }

    bool set_and_register(const Registration& reg, api::Policy policy, api::RecvUpdates3 fn3, std::string& error) {
        const auto h = handle_;
        const auto set = lib_->policy_set;
        if (call(
                "dcgmPolicySet", [set, h, g = reg.group, policy]() mutable { return set(h, g, &policy, 0); }, error) !=
            api::kOk)
            return false;
        if (lib_->major == 4) {
            const auto reg4 = lib_->policy_register4;
            return call(
                       "dcgmPolicyRegister_v2",
                       [reg4, h, g = reg.group, m = reg.mask, t = reg.ticket] {
                           return reg4(h, g, m, &callbacks::on_violation, t);
                       },
                       error) == api::kOk;
        }
        const auto reg3 = lib_->policy_register3;
        return call(
                   "dcgmPolicyRegister",
                   [reg3, h, g = reg.group, m = reg.mask, fn3] { return reg3(h, g, m, fn3, nullptr); },
                   error) == api::kOk;
    }

    // Withdraws the sinks first (no event after this), then undoes the registrations in DCGM
    // while the connection still answers.
    void unregister() {
        for (const auto& r : registrations_) callbacks::remove(r.ticket);
        const auto h = handle_;
        std::string ignored;
        for (const auto& r : registrations_) {
            if (!connected_ || lost_) break;
            const auto un = lib_->policy_unregister;
            call(
                "dcgmPolicyUnregister", [un, h, g = r.group, m = r.mask] { return un(h, g, m); }, ignored);
            if (r.own_group && !lost_) {
                const auto destroy = lib_->group_destroy;
                call(
                    "dcgmGroupDestroy", [destroy, h, g = r.group] { return destroy(h, g); }, ignored);
            }
        }
        registrations_.clear();
    }

    void close() {
        unregister();
        if (connected_ && !lost_) {
            const auto fn = lib_->disconnect;
            const auto h = handle_;
            std::string ignored;
            call(
                "dcgmDisconnect", [fn, h] { return fn(h); }, ignored);
        }
        connected_ = false;
        gpus_.clear();
    }

    const ClientOptions options_;
    mutable std::mutex mu_;
    Worker worker_;
    std::shared_ptr<const Library> lib_;
    api::Handle handle_ = 0;
    bool connected_ = false, lost_ = false, health_set_ = false;
    std::vector<Gpu> gpus_;
    std::map<unsigned, GpuFacts> facts_;
    std::vector<Registration> registrations_;
};

}  // namespace

std::unique_ptr<Client> make_client(const ClientOptions& options) {
    return std::make_unique<RealClient>(options);
}

}  // namespace jobtrail::dcgm
