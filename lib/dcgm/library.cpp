#include "dcgm/library.hpp"

#include <dlfcn.h>

namespace jobtrail::dcgm {
namespace {

// Resolves `symbol` into `fn`; false (and `missing` set) when the library lacks it.
template <class F>
bool resolve(void* handle, const char* symbol, F& fn, std::string& missing) {
    fn = reinterpret_cast<F>(dlsym(handle, symbol));
    if (!fn && missing.empty()) missing = symbol;
    return fn != nullptr;
}

std::shared_ptr<const Library> open_one(const std::string& name, std::string& error) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        error = why ? why : name + ": cannot be loaded";
        return nullptr;
    }
    auto lib = std::make_shared<Library>();
    lib->name = name;
    std::string missing;
    resolve(handle, "dcgmInit", lib->init, missing);
    resolve(handle, "dcgmConnect_v2", lib->connect, missing);
    resolve(handle, "dcgmDisconnect", lib->disconnect, missing);
    resolve(handle, "dcgmGetAllSupportedDevices", lib->devices, missing);
    resolve(handle, "dcgmGetDeviceAttributes", lib->attributes, missing);
    resolve(handle, "dcgmGroupCreate", lib->group_create, missing);
    resolve(handle, "dcgmGroupAddDevice", lib->group_add, missing);
    resolve(handle, "dcgmGroupDestroy", lib->group_destroy, missing);
    resolve(handle, "dcgmPolicySet", lib->policy_set, missing);
    resolve(handle, "dcgmPolicyUnregister", lib->policy_unregister, missing);
    resolve(handle, "dcgmHealthSet", lib->health_set, missing);
    resolve(handle, "dcgmHealthCheck", lib->health_check, missing);
    lib->error_string = reinterpret_cast<api::FnErrorString>(dlsym(handle, "errorString"));
    std::string none;
    if (resolve(handle, "dcgmPolicyRegister_v2", lib->policy_register4, none))
        lib->major = 4;
    else if (resolve(handle, "dcgmPolicyRegister", lib->policy_register3, none))
        lib->major = 3;
    else if (missing.empty())
        missing = "dcgmPolicyRegister_v2 (4.x) or dcgmPolicyRegister (3.x)";
    if (!missing.empty()) {
        error = name + ": no symbol " + missing;
        dlclose(handle);  // nothing of it was called
        return nullptr;
    }
    return lib;
}

}  // namespace

std::string Library::describe(api::Return r) const {
    const char* text = error_string ? error_string(r) : nullptr;
    return (text ? std::string(text) : "DCGM error") + " (" + std::to_string(r) + ")";
}

std::shared_ptr<const Library> load_library(const std::vector<std::string>& names, std::string& error) {
    error.clear();
    for (const auto& name : names) {
        std::string why;
        if (auto lib = open_one(name, why)) return lib;
        error += (error.empty() ? "" : "; ") + why;
    }
    if (names.empty()) error = "no DCGM library configured";
    return nullptr;
}

}  // namespace jobtrail::dcgm
