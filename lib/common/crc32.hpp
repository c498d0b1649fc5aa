#pragma once

#include <cstdint>
#include <string_view>

namespace jobtrail {

// CRC-32 as gzip and zlib compute it: the spool's frame checksum and the file source's
// fingerprint of a file's first bytes.
uint32_t crc32(std::string_view data);

}  // namespace jobtrail
