#pragma once

#include <string>
#include <vector>

#include "forensics/analysis.hpp"

namespace jobtrail::forensics {

// report.html: one self-contained page (inline CSS and SVG, no scripts, no fetches): the summary
// on top, then a timeline with one lane per node and a mark per finding, by kind and severity.
std::string render_report_html(const JobFacts& facts, const std::vector<Finding>& findings, const Finding* cause);

std::string html_escape(std::string_view s);

}  // namespace jobtrail::forensics
