#pragma once

#include <cstdint>
#include <string>
#include <string_view>

// The names of a bundle's files (the value-to-name mapping itself, path_component, is public:
// forensics/bundle.hpp).
namespace jobtrail::forensics::bundle {

// Every name in the bundle is made of path_component()s; checked again before a file is
// created and before a tar member is written, so a bug upstream cannot write outside.
bool clean_relative_path(std::string_view rel);

// The bundle's time in its name: 20261129T215222Z.
std::string utc_stamp(int64_t ns);

}  // namespace jobtrail::forensics::bundle
