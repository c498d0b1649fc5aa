#pragma once

#include <cstddef>
#include <cstdint>

// The part of NVIDIA DCGM's C API that jobtrail calls, declared here from the facts of DCGM's
// public headers (dcgmlib/dcgm_structs.h, dcgm_agent.h, dcgm_errors.h, dcgm_fields.h), read at
// tags v3.3.9 (the last 3.x) and v4.0.0..v4.6.0. Sizes and versions are checked below against the
// numbers DCGM's own dcgm_structs_internal.h asserts (DCGM_CASSERT) for the same tags. Shared by
// the loader (dcgm/library.cpp), the conversion (dcgm/convert.cpp) and the tests' stand-in
// library (tests/fixtures/dcgm), so that all three agree with the numbers, not with each other.
namespace jobtrail::dcgm::api {

// dcgm_structs.h (3.x, 4.x): MAKE_DCGM_VERSION(type, ver) = sizeof(type) | ver << 24.
constexpr unsigned make_version(size_t size, unsigned ver) {
    return static_cast<unsigned>(size) | (ver << 24U);
}

// dcgm_structs.h (3.x, 4.x): uintptr_t handles.
using Handle = uintptr_t;
using GroupId = uintptr_t;
using StatusHandle = uintptr_t;
using Return = int;  // dcgmReturn_t

// dcgm_structs.h dcgmReturn_t (3.x, 4.x): the codes jobtrail tells apart.
inline constexpr Return kOk = 0;                    // DCGM_ST_OK
inline constexpr Return kBadParam = -1;             // DCGM_ST_BADPARAM
inline constexpr Return kGenericError = -3;         // DCGM_ST_GENERIC_ERROR
inline constexpr Return kNotSupported = -6;         // DCGM_ST_NOT_SUPPORTED
inline constexpr Return kTimeout = -11;             // DCGM_ST_TIMEOUT
inline constexpr Return kVerMismatch = -12;         // DCGM_ST_VER_MISMATCH
inline constexpr Return kGpuIsLost = -18;           // DCGM_ST_GPU_IS_LOST
inline constexpr Return kConnectionNotValid = -21;  // DCGM_ST_CONNECTION_NOT_VALID

// dcgm_structs.h (3.x, 4.x).
inline constexpr GroupId kGroupAllGpus = 0x7fffffff;  // DCGM_GROUP_ALL_GPUS
inline constexpr int kGroupEmpty = 1;                 // dcgmGroupType_t DCGM_GROUP_EMPTY
inline constexpr size_t kMaxNumDevices = 32;          // DCGM_MAX_NUM_DEVICES (2.0 and newer)
inline constexpr size_t kMaxStrLength = 256;          // DCGM_MAX_STR_LENGTH
inline constexpr size_t kMaxClocks = 256;             // DCGM_MAX_CLOCKS
inline constexpr unsigned kInt32Blank = 0x7ffffff0;   // DCGM_INT32_BLANK: "no value"

// dcgm_structs.h dcgmConnectV2Params_v2 (3.x, 4.x); version 0x02000010 asserted by both.
struct ConnectV2Params {
    unsigned version;
    unsigned persistAfterDisconnect;
    unsigned timeoutMs;
    unsigned addressIsUnixSocket;
};
inline constexpr unsigned kConnectV2ParamsVersion2 = make_version(sizeof(ConnectV2Params), 2);
static_assert(kConnectV2ParamsVersion2 == 0x02000010);

// dcgm_structs.h dcgmDeviceAttributes_v3 and its members (3.x, 4.x): all plain unsigned/char
// fields, so the whole struct is declared (0x3001464 asserted by both) rather than asking for the
// PCI bus id as a field value, whose dcgmFieldValue_v1 union and watch set-up are larger risks.
struct ClockSet {  // dcgmClockSet_v1
    int version;
    unsigned memClock, smClock;
};
struct DeviceAttributes {
    unsigned version;
    struct {  // dcgmDeviceSupportedClockSets_v1
        unsigned version, count;
        ClockSet clockSet[kMaxClocks];
    } clockSets;
    struct {  // dcgmDeviceThermals_v1
        unsigned version, slowdownTemp, shutdownTemp;
    } thermalSettings;
    struct {  // dcgmDevicePowerLimits_v1 (W)
        unsigned version, curPowerLimit, defaultPowerLimit, enforcedPowerLimit, minPowerLimit, maxPowerLimit;
    } powerLimits;
    struct {  // dcgmDeviceIdentifiers_v1
        unsigned version;
        char brandName[kMaxStrLength], deviceName[kMaxStrLength], pciBusId[kMaxStrLength], serial[kMaxStrLength],
            uuid[kMaxStrLength], vbios[kMaxStrLength], inforomImageVersion[kMaxStrLength];
        unsigned pciDeviceId, pciSubSystemId;
        char driverVersion[kMaxStrLength];
        unsigned virtualizationMode;
    } identifiers;
    struct {  // dcgmDeviceMemoryUsage_v1
        unsigned version, bar1Total, fbTotal, fbUsed, fbFree;
    } memoryUsage;
    struct {  // dcgmDeviceSettings_v2
        unsigned version, persistenceModeEnabled, migModeEnabled, confidentialComputeMode;
    } settings;
};
inline constexpr unsigned kDeviceAttributesVersion3 = make_version(sizeof(DeviceAttributes), 3);
static_assert(kDeviceAttributesVersion3 == 0x3001464);

// dcgm_structs.h dcgmPolicyCondition_t (3.x, 4.x): one bit per condition; DCGM_POLICY_COND_IDX_*
// is the bit's index, which also indexes dcgmPolicy_v1::parms.
enum Condition : unsigned {
    kCondDbe = 0x1,              // DCGM_POLICY_COND_DBE (boolean)
    kCondPci = 0x2,              // DCGM_POLICY_COND_PCI (boolean)
    kCondMaxPagesRetired = 0x4,  // DCGM_POLICY_COND_MAX_PAGES_RETIRED (number)
    kCondThermal = 0x8,          // DCGM_POLICY_COND_THERMAL (number: C)
    kCondPower = 0x10,           // DCGM_POLICY_COND_POWER (number: W)
    kCondNvlink = 0x20,          // DCGM_POLICY_COND_NVLINK (boolean)
    kCondXid = 0x40,             // DCGM_POLICY_COND_XID (boolean in practice)
};
inline constexpr unsigned kConditionsAll = 0x7f;
inline constexpr size_t kPolicyCondMax = 7;  // DCGM_POLICY_COND_MAX

// dcgm_structs.h dcgmPolicyConditionParams_t (3.x, 4.x).
struct PolicyConditionParams {
    enum : int { kBool = 0, kLlong = 1 } tag;  // BOOL, LLONG
    union {
        unsigned boolean;
        unsigned long long llval;
    } val;
};
// dcgm_structs.h dcgmPolicy_v1 (3.x, 4.x): 16777360 asserted by both. The enums (mode,
// isolation, action, validation, response) are all 0 = automated / none.
struct Policy {
    unsigned version;
    unsigned condition;
    int mode, isolation, action, validation, response;
    PolicyConditionParams parms[kPolicyCondMax];
};
inline constexpr unsigned kPolicyVersion1 = make_version(sizeof(Policy), 1);
static_assert(kPolicyVersion1 == 16777360);

// dcgm_structs.h violation structs (3.x, 4.x): `timestamp` is DCGM's field value time (µs since
// the epoch).
struct ConditionDbe {
    long long timestamp;
    int location;  // enum: L1, L2, DEVICE, REGISTER, TEXTURE
    unsigned numerrors;
};
struct ConditionPci {
    long long timestamp;
    unsigned counter;
};
struct ConditionMpr {
    long long timestamp;
    unsigned sbepages, dbepages;
};
struct ConditionThermal {
    long long timestamp;
    unsigned thermalViolation;
};
struct ConditionPower {
    long long timestamp;
    unsigned powerViolation;
};
struct ConditionNvlink {
    long long timestamp;
    unsigned short fieldId;
    unsigned counter;
};
struct ConditionXid {
    long long timestamp;
    unsigned errnum;
};
union ConditionValue {
    ConditionDbe dbe;
    ConditionPci pci;
    ConditionMpr mpr;
    ConditionThermal thermal;
    ConditionPower power;
    ConditionNvlink nvlink;
    ConditionXid xid;
};

// dcgm_structs.h dcgmPolicyCallbackResponse_v1 (3.x: 16777240 asserted; no GPU id, so 3.x
// registers one group per GPU) and _v2 (4.x: 33554464 asserted; gpuId after the union).
struct PolicyCallbackResponseV1 {
    unsigned version;
    unsigned condition;
    ConditionValue val;
};
struct PolicyCallbackResponseV2 {
    unsigned version;
    unsigned condition;
    ConditionValue val;
    unsigned gpuId;
};
inline constexpr unsigned kPolicyCallbackResponseVersion1 = make_version(sizeof(PolicyCallbackResponseV1), 1);
inline constexpr unsigned kPolicyCallbackResponseVersion2 = make_version(sizeof(PolicyCallbackResponseV2), 2);
static_assert(kPolicyCallbackResponseVersion1 == 16777240);
static_assert(kPolicyCallbackResponseVersion2 == 33554464);
static_assert(offsetof(PolicyCallbackResponseV2, val) == 8 && offsetof(PolicyCallbackResponseV2, gpuId) == 24);

// dcgm_agent.h fpRecvUpdates: 3.x `int (*)(void *response)` (dcgmPolicyRegister's begin and
// finish callbacks), 4.x `int (*)(dcgmPolicyCallbackResponse_t *, uint64_t userData)`
// (dcgmPolicyRegister_v2).
using RecvUpdates3 = int (*)(void* response);
using RecvUpdates4 = int (*)(PolicyCallbackResponseV2* response, uint64_t user_data);

// dcgm_structs.h dcgmHealthSystems_t (3.x; 4.x adds CONNECTX 0x1000); DCGM_HEALTH_WATCH_ALL
// = 0xFFFFFFFF.
inline constexpr unsigned kHealthWatchAll = 0xffffffffU;
// dcgm_structs.h dcgmHealthWatchResults_t (3.x, 4.x).
inline constexpr unsigned kHealthResultPass = 0, kHealthResultWarn = 10, kHealthResultFail = 20;
// dcgm_fields.h dcgm_field_entity_group_t (3.x, 4.x): DCGM_FE_GPU.
inline constexpr unsigned kEntityGpu = 1;

// dcgm_structs.h dcgmIncidentInfo_t (3.x, 4.x): 1044 bytes.
struct IncidentInfo {
    unsigned system;  // dcgmHealthSystems_t
    unsigned health;  // dcgmHealthWatchResults_t
    struct {          // dcgmDiagErrorDetail_t
        char msg[1024];
        unsigned code;  // dcgmError_t (DCGM_FR_*)
    } error;
    struct {  // dcgmGroupEntityPair_t
        unsigned entityGroupId;
        unsigned entityId;
    } entityInfo;
};
static_assert(sizeof(IncidentInfo) == 1044);
// dcgm_structs.h dcgmHealthResponse_v4 (3.x: DCGM_HEALTH_WATCH_MAX_INCIDENTS = 64, 0x0401050C
// asserted) and _v5 (4.x: DCGM_HEALTH_WATCH_MAX_INCIDENTS_V2 = 1024, 0x510500c asserted).
template <size_t N>
struct HealthResponse {
    unsigned version;
    unsigned overallHealth;
    unsigned incidentCount;
    IncidentInfo incidents[N];
};
using HealthResponseV4 = HealthResponse<64>;
using HealthResponseV5 = HealthResponse<1024>;
inline constexpr unsigned kHealthResponseVersion4 = make_version(sizeof(HealthResponseV4), 4);
inline constexpr unsigned kHealthResponseVersion5 = make_version(sizeof(HealthResponseV5), 5);
static_assert(kHealthResponseVersion4 == 0x0401050C);
static_assert(kHealthResponseVersion5 == 0x510500c);
static_assert(offsetof(HealthResponseV5, incidents) == 12);

// dcgm_agent.h (3.x and 4.x unless said), all extern "C".
using FnInit = Return (*)();                                                    // dcgmInit
using FnShutdown = Return (*)();                                                // dcgmShutdown
using FnConnectV2 = Return (*)(const char*, ConnectV2Params*, Handle*);         // dcgmConnect_v2
using FnDisconnect = Return (*)(Handle);                                        // dcgmDisconnect
using FnGetAllSupportedDevices = Return (*)(Handle, unsigned*, int*);           // dcgmGetAllSupportedDevices
using FnGetDeviceAttributes = Return (*)(Handle, unsigned, DeviceAttributes*);  // dcgmGetDeviceAttributes
using FnGroupCreate = Return (*)(Handle, int, const char*, GroupId*);           // dcgmGroupCreate
using FnGroupAddDevice = Return (*)(Handle, GroupId, unsigned);                 // dcgmGroupAddDevice
using FnGroupDestroy = Return (*)(Handle, GroupId);                             // dcgmGroupDestroy
using FnPolicySet = Return (*)(Handle, GroupId, Policy*, StatusHandle);         // dcgmPolicySet
using FnPolicyRegister3 = Return (*)(Handle, GroupId, unsigned, RecvUpdates3, RecvUpdates3);  // 3.x dcgmPolicyRegister
using FnPolicyRegister4 = Return (*)(Handle, GroupId, unsigned, RecvUpdates4, uint64_t);  // 4.x dcgmPolicyRegister_v2
using FnPolicyUnregister = Return (*)(Handle, GroupId, unsigned);                         // dcgmPolicyUnregister
using FnHealthSet = Return (*)(Handle, GroupId, unsigned);                                // dcgmHealthSet
using FnHealthCheck = Return (*)(Handle, GroupId, void*);  // dcgmHealthCheck (v4 or v5 response)
using FnErrorString = const char* (*)(Return);             // errorString (DCGM's spelling)

}  // namespace jobtrail::dcgm::api
