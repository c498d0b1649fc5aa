#pragma once

#include <memory>
#include <string>
#include <vector>

#include "dcgm/api.hpp"

// NVIDIA's libdcgm loaded at run time: the first of the given libraries that dlopen finds and
// that has every entry point jobtrail calls. Its major (3 or 4) is told by the registration entry
// point it exports (3.x: dcgmPolicyRegister, 4.x: dcgmPolicyRegister_v2; dcgmlib.linux_def of
// v3.3.9 and v4.x) and picks the struct versions. A loaded library is never unloaded: a call
// abandoned past its time bound may still be running in it.
namespace jobtrail::dcgm {

struct Library {
    std::string name;  // as given ("libdcgm.so.4" or a path)
    int major = 0;     // 3 or 4
    api::FnInit init = nullptr;
    api::FnConnectV2 connect = nullptr;
    api::FnDisconnect disconnect = nullptr;
    api::FnGetAllSupportedDevices devices = nullptr;
    api::FnGetDeviceAttributes attributes = nullptr;
    api::FnGroupCreate group_create = nullptr;
    api::FnGroupAddDevice group_add = nullptr;
    api::FnGroupDestroy group_destroy = nullptr;
    api::FnPolicySet policy_set = nullptr;
    api::FnPolicyRegister3 policy_register3 = nullptr;  // 3.x
    api::FnPolicyRegister4 policy_register4 = nullptr;  // 4.x
    api::FnPolicyUnregister policy_unregister = nullptr;
    api::FnHealthSet health_set = nullptr;
    api::FnHealthCheck health_check = nullptr;
    api::FnErrorString error_string = nullptr;  // optional

    // "DCGM_ST_... text (-21)" for a return code.
    std::string describe(api::Return r) const;
};

// The first usable library of `names` (tried in order), or nullptr with `error` naming each one
// tried and why it failed ("libdcgm.so.4: cannot open shared object file...; libdcgm.so.3: no
// symbol dcgmHealthCheck").
std::shared_ptr<const Library> load_library(const std::vector<std::string>& names, std::string& error);

}  // namespace jobtrail::dcgm
