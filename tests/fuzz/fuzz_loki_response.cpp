// Loki's answers come over the network: the classifier must take any body.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "loki/response.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size < 2) return 0;
    const long status = 100 + (data[0] | (data[1] << 8)) % 500;
    const auto r = jobtrail::loki::classify_push_response(
        status, std::string_view(reinterpret_cast<const char*>(data) + 2, size - 2));
    if (r.first_message.size() > 512) __builtin_trap();
    return 0;
}
