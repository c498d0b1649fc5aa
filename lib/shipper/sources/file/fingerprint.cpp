#include "shipper/sources/file/fingerprint.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <string_view>

#include "common/crc32.hpp"

namespace jobtrail::shipper {
namespace {

constexpr size_t kFingerprintBytes = 256;
constexpr std::string_view kFull = "256:";  // the prefix of one taken of kFingerprintBytes

std::string of(const std::string& bytes) {
    return std::to_string(bytes.size()) + ":" + std::to_string(crc32(bytes));
}

}  // namespace

std::string fingerprint(int fd, uint64_t size) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(size, kFingerprintBytes));
    std::string buf(n, '\0');
    const ssize_t r = ::pread(fd, buf.data(), n, 0);
    buf.resize(r > 0 ? static_cast<size_t>(r) : 0);
    return of(buf);
}

bool same_file(int fd, const std::string& saved) {
    const size_t colon = saved.find(':');
    if (colon == std::string::npos) return false;
    const uint64_t len = std::strtoull(saved.c_str(), nullptr, 10);
    std::string buf(len, '\0');
    const ssize_t r = ::pread(fd, buf.data(), len, 0);
    if (r != static_cast<ssize_t>(len)) return false;
    return saved == of(buf);
}

bool fingerprint_full(const std::string& fp) {
    return std::string_view(fp).substr(0, kFull.size()) == kFull;
}

bool fingerprint_empty(const std::string& fp) {
    return fp.rfind("0:", 0) == 0;
}

}  // namespace jobtrail::shipper
