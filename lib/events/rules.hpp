#pragma once

#include <span>
#include <string_view>

#include "events/xid_catalogue.hpp"

namespace jobtrail::events {

// One recognition rule. Named RE2 groups carry the fields: (?P<bdf>…), (?P<xid>…),
// (?P<detail>…), (?P<comm>…), (?P<pid>…). When the rule yields an Xid code, meaning, action
// and severity come from the Xid catalogue instead of the row.
struct Rule {
    std::string_view name;
    std::string_view kind;
    std::string_view literal;  // must occur in the message for the regex to be tried
    std::string_view pattern;
    Severity severity;
    std::string_view meaning;
    std::string_view action;
    int fixed_xid = 0;  // for Xid messages that do not print their code (Xid 79 variants)
};

std::span<const Rule> rules();

}  // namespace jobtrail::events
