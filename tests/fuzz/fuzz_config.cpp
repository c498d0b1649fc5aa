// Configuration text: any input gives a config plus errors, never a crash or an exception.
#include <cstddef>
#include <cstdint>
#include <string>

#include "config/config.hpp"
#include "shipper/sources/registry.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    try {
        const auto r = jobtrail::config::parse_config(text, "fuzz.yaml", jobtrail::shipper::source_sections());
        for (const auto& err : r.errors) (void)err.text();
    } catch (...) {
        __builtin_trap();  // parse_config promises not to throw
    }
    return 0;
}
