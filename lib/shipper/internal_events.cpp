#include "shipper/internal_events.hpp"

namespace jobtrail::shipper {

std::string_view severity_name(Severity s) {
    switch (s) {
        case Severity::kInfo:
            return "info";
        case Severity::kWarning:
            return "warning";
        case Severity::kError:
            return "error";
    }
    return "info";
}

}  // namespace jobtrail::shipper
