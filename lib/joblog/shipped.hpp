#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

// A job log line as the shipper sends it to Loki (docs/job-log-format.md): the file's phase, then
// the line without its timestamp (the Loki entry carries it):
//
//   <phase> <tag>[<name>] <text>        prolog status[10-health.sh] status=1 result=exit
//
// A file whose phase its path does not tell is sent as "<tag>[<name>] <text>". The shipper makes
// it; `jobtrail bundle`, its analysis and `jobtrail node` read it back.
namespace jobtrail::joblog {

struct ShippedLine {
    std::string_view phase;  // "" when the line does not begin with one
    std::string_view tag;    // without its [name]
    std::string_view name;   // "" without one, or when its ']' is missing
    std::string_view text;
};

// tag, name and text as a job log line holds them (parse_line): name already made usable in [ ].
std::string make_shipped_line(std::string_view phase, std::string_view tag, std::string_view name,
                              std::string_view text);

// Views point into `line`. The line's first word is its phase when it is `phase` (the phase the
// line is known to be of: its stream's label) or, without one, when it is prolog or epilog.
ShippedLine parse_shipped_line(std::string_view line, std::string_view phase = {});

// A regular expression (RE2, a LogQL line filter) for the shipped lines of these tags, in either
// phase, named or not: ^(prolog|epilog) (meta|end).
std::string shipped_tags_pattern(std::initializer_list<std::string_view> tags);

}  // namespace jobtrail::joblog
