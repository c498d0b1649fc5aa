// A {job="dcgm"} line read back from Loki (anyone who can push to the tenant can write one): the
// parser must not crash, and what it accepts must format to a line that parses to the same event.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "dcgm/event.hpp"

using namespace jobtrail::dcgm;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const auto e = parse_line(std::string_view(reinterpret_cast<const char*>(data), size));
    if (!e) return 0;
    const auto back = parse_line(format_line(*e));
    if (!back || back->kind != e->kind || back->gpu != e->gpu || back->value != e->value || back->value2 != e->value2 ||
        back->cleared != e->cleared)
        __builtin_trap();
    (void)metadata(*e);
    return 0;
}
