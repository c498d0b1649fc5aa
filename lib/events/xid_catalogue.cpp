#include "events/xid_catalogue.hpp"

#include <algorithm>
#include <array>

namespace jobtrail::events {
namespace {

using S = Severity;

constexpr std::string_view kRestartApp = "restart the application; the node is fine";
constexpr std::string_view kResetGpu = "drain the node and reset the GPU (nvidia-smi -r) or reboot";
constexpr std::string_view kReboot = "drain the node and reboot it (bare-metal restart)";

// Sorted by code (find_xid uses binary search).
constexpr std::array kCatalogue = {
    XidInfo{8, "IDLE_TIMEOUT", "GPU stopped processing (idle timeout)", "RESTART_APP", "CONTACT_SUPPORT", kRestartApp,
            S::kError},
    XidInfo{13, "GR_EXCEPTION", "Graphics engine exception (SM warp error or illegal address)", "RESTART_APP",
            "WORKFLOW_XID_13", "restart the application; usually an application bug unless several GPUs report it",
            S::kError},
    XidInfo{31, "MMU_ERR_FLT", "GPU memory page fault", "RESTART_APP", "WORKFLOW_XID_31",
            "restart the application; usually an application bug (illegal memory access)", S::kError},
    XidInfo{32, "PBDMA_ERROR", "Invalid or corrupted push buffer stream", "RESTART_APP", "CHECK_APP_CUDA",
            "restart the application; check the application and the CUDA/driver versions", S::kError},
    XidInfo{43, "RESETCHANNEL_VERIF_ERROR", "GPU stopped processing (follows an application fault such as Xid 13/31)",
            "IGNORE", "CONTACT_SUPPORT", "no node action; look at the Xid it accompanies", S::kWarning},
    XidInfo{45, "PREEMPTIVE_REMOVAL", "Preemptive cleanup after previous errors", "WORKFLOW_XID_45",
            "RESTART_FM_IF_ALONE", "follow the other Xids reported with it; alone, restart fabric manager",
            S::kWarning},
    XidInfo{46, "GPU_TIMEOUT_ERROR", "GPU stopped processing (timeout)", "RESET_GPU", "CONTACT_SUPPORT", kResetGpu,
            S::kFatal},
    XidInfo{48, "GPU_ECC_DBE", "Double-bit ECC error (uncorrectable memory error)", "WORKFLOW_XID_48",
            "WORKFLOW_XID_48", "drain the node and reset the GPU; watch for row remapping failures (RMA)", S::kFatal},
    XidInfo{61, "PMU_BREAKPOINT", "Internal micro-controller breakpoint/warning", "CONTACT_SUPPORT", "",
            "drain the node if it recurs and contact NVIDIA support", S::kFatal},
    XidInfo{62, "PMU_HALT_ERROR", "Internal micro-controller halt", "RESET_GPU", "CONTACT_SUPPORT", kResetGpu,
            S::kFatal},
    XidInfo{63, "INFOROM_DRAM_RETIREMENT_EVENT", "Row remapping or page retirement pending", "IGNORE", "IGNORE",
            "reset the GPU when the job ends to activate the remapping", S::kInfo},
    XidInfo{64, "INFOROM_DRAM_RETIREMENT_FAILURE", "Row remapping or page retirement failed", "RESET_GPU",
            "CONTACT_SUPPORT", "drain the node, reset the GPU, track it for RMA", S::kFatal},
    XidInfo{68, "NVDEC0_EXCEPTION", "Video decoder exception", "RESTART_APP", "CONTACT_SUPPORT", kRestartApp,
            S::kError},
    XidInfo{69, "GR_CLASS_ERROR", "Graphics engine class error", "RESTART_APP", "CHECK_APP_CUDA", kRestartApp,
            S::kError},
    XidInfo{74, "NVLINK_ERROR", "NVLink error", "WORKFLOW_NVLINK_ERR", "CONTACT_SUPPORT",
            "drain the node and check NVLink (nvidia-smi nvlink --status / --errorcounters)", S::kFatal},
    XidInfo{79, "GPU_HAS_FALLEN_OFF_THE_BUS", "GPU has fallen off the bus", "RESTART_BM", "CONTACT_SUPPORT", kReboot,
            S::kFatal},
    XidInfo{92, "EXCESSIVE_SBE_INTERRUPTS", "High single-bit ECC error rate", "IGNORE", "CONTACT_SUPPORT",
            "watch the GPU; contact support if it continues", S::kWarning},
    XidInfo{94, "CONTAINED_ERROR", "Contained memory error (only the affected application is terminated)",
            "RESTART_APP", "IGNORE", kRestartApp, S::kError},
    XidInfo{95, "UNCONTAINED_ERROR", "Uncontained memory error (all applications on the GPU are affected)", "RESET_GPU",
            "IGNORE", kResetGpu, S::kFatal},
    XidInfo{109, "CTXSW_TIMEOUT_ERROR", "Context switch timeout", "RESET_GPU", "CONTACT_SUPPORT", kResetGpu, S::kFatal},
    XidInfo{119, "GSP_RPC_TIMEOUT", "Timeout waiting for the GPU System Processor (GSP)", "RESET_GPU", "INVESTIGATE_SW",
            kResetGpu, S::kFatal},
    XidInfo{120, "GSP_ERROR", "GPU System Processor (GSP) error", "RESET_GPU", "INVESTIGATE_SW", kResetGpu, S::kFatal},
    XidInfo{136, "ALI_TRAINING_FAIL", "NVLink link training failed", "RESET_GPU", "INVESTIGATE_LINK_SI", kResetGpu,
            S::kFatal},
    XidInfo{140, "UNRECOVERABLE_ECC_ERROR_ESCAPE", "Unrecoverable ECC error escaped containment", "RESET_GPU",
            "CONTACT_SUPPORT", kResetGpu, S::kFatal},
    XidInfo{143, "GPU_INIT_ERROR", "GPU initialisation error", "RESET_GPU", "CONTACT_SUPPORT", kResetGpu, S::kFatal},
    XidInfo{144, "NVLINK_SAW_ERROR", "NVLink5 SAW error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR",
            "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{145, "NVLINK_RLW_ERROR", "NVLink5 RLW error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR",
            "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{146, "NVLINK_TLW_ERROR", "NVLink5 TLW error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR",
            "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{147, "NVLINK_TREX_ERROR", "NVLink5 TREX error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR",
            "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{148, "NVLINK_NVLPW_CTRL_ERROR", "NVLink5 NVLPW control error", "WORKFLOW_NVLINK5_ERR",
            "WORKFLOW_NVLINK5_ERR", "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{149, "NVLINK_NETIR_ERROR", "NVLink5 NETIR link event", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR",
            "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{150, "NVLINK_MSE_ERROR", "NVLink5 MSE error", "WORKFLOW_NVLINK5_ERR", "WORKFLOW_NVLINK5_ERR",
            "drain the node; follow NVIDIA's NVLink5 workflow", S::kFatal},
    XidInfo{154, "GPU_RECOVERY_ACTION_CHANGED", "GPU recovery action changed (names the action another Xid requires)",
            "XID_154", "", "act on the recovery action it names", S::kWarning},
    XidInfo{155, "NVLINK_SW_DEFINED", "NVLink software-defined error", "RESET_GPU", "", kResetGpu, S::kFatal},
    XidInfo{156, "RESOURCE_RETIREMENT_EVENT", "Resource retirement event", "RESET_GPU", "", kResetGpu, S::kFatal},
    XidInfo{157, "RESOURCE_RETIREMENT_FAILURE", "Resource retirement failure", "RESET_GPU", "CONTACT_SUPPORT",
            kResetGpu, S::kFatal},
    XidInfo{158, "GPU_FATAL_TIMEOUT", "GPU fatal timeout", "RESET_GPU", "", kResetGpu, S::kFatal},
    XidInfo{171, "UNCORRECTABLE_DRAM_ERROR", "Uncorrectable DRAM error (detail for Xid 48)", "WORKFLOW_XID_48", "",
            "drain the node and reset the GPU", S::kFatal},
    XidInfo{172, "UNCORRECTABLE_SRAM_ERROR", "Uncorrectable SRAM error (detail for Xid 48)", "WORKFLOW_XID_48", "",
            "drain the node and reset the GPU", S::kFatal},
};

static_assert(std::is_sorted(kCatalogue.begin(), kCatalogue.end(),
                             [](const XidInfo& a, const XidInfo& b) { return a.code < b.code; }));

}  // namespace

std::string_view severity_name(Severity s) {
    switch (s) {
        case Severity::kInfo:
            return "info";
        case Severity::kWarning:
            return "warning";
        case Severity::kError:
            return "error";
        case Severity::kFatal:
            return "fatal";
    }
    return "unknown";
}

const XidInfo* find_xid(int code) {
    auto it = std::lower_bound(kCatalogue.begin(), kCatalogue.end(), code,
                               [](const XidInfo& x, int c) { return x.code < c; });
    return (it != kCatalogue.end() && it->code == code) ? &*it : nullptr;
}

std::span<const XidInfo> xid_catalogue() {
    return kCatalogue;
}

}  // namespace jobtrail::events
