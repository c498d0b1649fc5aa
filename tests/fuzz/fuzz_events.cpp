// Kernel message text, possibly hostile: the extractor must not crash or misbehave.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "events/extractor.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static const jobtrail::events::Extractor ex;
    const auto e = ex.extract(std::string_view(reinterpret_cast<const char*>(data), size));
    if (e && e->kind.empty()) __builtin_trap();
    return 0;
}
