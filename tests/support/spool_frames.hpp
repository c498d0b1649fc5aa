#pragma once

#include <string>
#include <vector>

#include "spool/record.hpp"

// Spool frames made for tests and fuzzers (the spool itself writes only compressed runs, through
// its RunBuilder): payloads 1 and 2 byte for byte as older shippers wrote them (lib/spool/record.hpp
// gives their layout), so the readers the spool keeps for them stay tested, and a compressed run
// from whole records.
namespace jobtrail::spool {

void append_frame(std::string& out, const Record& r);                   // payload 1
void append_run(std::string& out, const std::vector<Record>& records);  // payload 2: one stream's, at least one
void append_compressed_run(std::string& out, const std::vector<Record>& records);  // payload 3: the same

// How many segment files (seg-*) a spool directory holds.
int count_segments(const std::string& dir);

}  // namespace jobtrail::spool
