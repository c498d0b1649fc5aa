#pragma once

#include <cstdint>
#include <string>

// A file is known by device, inode and a fingerprint of its first bytes: an inode reused by a new
// file, or a file rewritten from its start, is a new file. "<length>:<crc32>" of up to the first
// 256 bytes, saved in the checkpoint.
namespace jobtrail::shipper {

std::string fingerprint(int fd, uint64_t size);
// A saved fingerprint of L bytes matches a file whose first L bytes hash the same.
bool same_file(int fd, const std::string& saved);
// Taken of all the bytes it can be: a file that grows keeps it. Shorter ones are taken again.
bool fingerprint_full(const std::string& fp);
// Taken of an empty file: it cannot tell one from another.
bool fingerprint_empty(const std::string& fp);

}  // namespace jobtrail::shipper
