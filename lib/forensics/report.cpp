#include "forensics/report.hpp"

#include <algorithm>

#include "common/time.hpp"

namespace jobtrail::forensics {
namespace {

const char* color(events::Severity s) {
    switch (s) {
        case events::Severity::kFatal:
            return "#b3001b";
        case events::Severity::kError:
            return "#e8590c";
        case events::Severity::kWarning:
            return "#f2c200";
        default:
            return "#4263eb";
    }
}

std::string num(double v) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", v);
    return b;
}

}  // namespace

std::string html_escape(std::string_view s) {
    std::string out;
    for (const char c : s) {
        switch (c) {
            case '&':
                out += "&amp;";
                break;
            case '<':
                out += "&lt;";
                break;
            case '>':
                out += "&gt;";
                break;
            case '"':
                out += "&quot;";
                break;
            default:
                out += c;
        }
    }
    return out;
}

std::string render_report_html(const JobFacts& j, const std::vector<Finding>& fs, const Finding* cause) {
    std::vector<std::string> nodes = j.nodes;
    for (const auto& f : fs)
        if (std::find(nodes.begin(), nodes.end(), f.node) == nodes.end()) nodes.push_back(f.node);
    int64_t t0 = j.start_ns, t1 = j.end_ns;
    for (const auto& f : fs) {
        if (!t0 || f.ts_ns < t0) t0 = f.ts_ns;
        t1 = std::max(t1, f.ts_ns);
    }
    if (t1 <= t0) t1 = t0 + 1'000'000'000;
    constexpr double kLeft = 160, kWidth = 900, kLane = 34;
    const double height = 40 + kLane * static_cast<double>(std::max<size_t>(nodes.size(), 1));
    auto x = [&](int64_t ts) { return kLeft + kWidth * static_cast<double>(ts - t0) / static_cast<double>(t1 - t0); };

    std::string h;
    h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>jobtrail: job " +
         html_escape(j.job_id) + "</title>\n";
    h += "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}"
         "h1{font-size:20px}h2{font-size:16px;margin-top:28px}"
         ".cause{border-left:6px solid #b3001b;background:#fff4f4;padding:10px 14px}"
         "table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;"
         "vertical-align:top}code{font-size:12px}.sev{font-weight:bold}"
         ".legend span{display:inline-block;margin-right:14px}.dot{display:inline-block;width:10px;height:10px;"
         "border-radius:5px;margin-right:4px}</style>\n</head><body>\n";
    h += "<h1>Job " + html_escape(j.job_id) + (j.cluster.empty() ? "" : " on " + html_escape(j.cluster)) + "</h1>\n";
    h += "<p>" + (j.user.empty() ? "" : "user <b>" + html_escape(j.user) + "</b>, ") +
         (j.partition.empty() ? "" : "partition <b>" + html_escape(j.partition) + "</b>, ") +
         std::to_string(nodes.size()) + " node(s), window " + html_escape(format_rfc3339_ns(j.start_ns)) + " .. " +
         html_escape(format_rfc3339_ns(j.end_ns)) + "</p>\n";
    h += "<h2>Most likely cause</h2>\n<div class=\"cause\">";
    if (cause) {
        h += "<b>" + html_escape(cause->node) + "</b> at " + html_escape(format_rfc3339_ns(cause->ts_ns)) + ": " +
             html_escape(cause->title) + "<br><i>" + html_escape(cause->action) + "</i><br><code>" +
             html_escape(cause->quote) + "</code>";
    } else {
        h += "Nothing recognised in the job's window.";
    }
    h += "</div>\n<h2>Timeline</h2>\n<div class=\"legend\">";
    for (const auto s :
         {events::Severity::kFatal, events::Severity::kError, events::Severity::kWarning, events::Severity::kInfo})
        h += "<span><i class=\"dot\" style=\"background:" + std::string(color(s)) + "\"></i>" +
             std::string(events::severity_name(s)) + "</span>";
    h += "</div>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" + num(kLeft + kWidth + 20) + "\" height=\"" +
         num(height) + "\" role=\"img\" aria-label=\"timeline by node\">\n";
    for (size_t i = 0; i < nodes.size(); ++i) {
        const double y = 20 + kLane * static_cast<double>(i) + kLane / 2;
        h += "<text x=\"4\" y=\"" + num(y + 4) + "\" font-size=\"13\">" + html_escape(nodes[i]) + "</text>";
        h += "<line x1=\"" + num(kLeft) + "\" y1=\"" + num(y) + "\" x2=\"" + num(kLeft + kWidth) + "\" y2=\"" + num(y) +
             "\" stroke=\"#bbb\"/>\n";
        for (const auto& f : fs) {
            if (f.node != nodes[i]) continue;
            // kernel and DCGM (device events), NCCL, scripts
            const std::string shape =
                f.source == "kmsg" || f.source == "dcgm" ? "circle" : (f.source == "nccl" ? "rect" : "polygon");
            const double cx = x(f.ts_ns);
            std::string title = "<title>" +
                                html_escape(format_rfc3339_ns(f.ts_ns) + " " + f.title +
                                            (f.count > 1 ? " (x" + std::to_string(f.count) + ")" : "")) +
                                "</title>";
            if (shape == "circle")
                h += "<circle cx=\"" + num(cx) + "\" cy=\"" + num(y) + "\" r=\"7\" fill=\"" + color(f.severity) +
                     "\">" + title + "</circle>\n";
            else if (shape == "rect")
                h += "<rect x=\"" + num(cx - 6) + "\" y=\"" + num(y - 6) + "\" width=\"12\" height=\"12\" fill=\"" +
                     color(f.severity) + "\">" + title + "</rect>\n";
            else
                h += "<polygon points=\"" + num(cx) + "," + num(y - 8) + " " + num(cx + 7) + "," + num(y + 6) + " " +
                     num(cx - 7) + "," + num(y + 6) + "\" fill=\"" + color(f.severity) + "\">" + title + "</polygon>\n";
        }
    }
    h += "<text x=\"" + num(kLeft) + "\" y=\"" + num(height - 4) + "\" font-size=\"11\">" +
         html_escape(format_rfc3339_ns(t0)) + "</text><text x=\"" + num(kLeft + kWidth) + "\" y=\"" + num(height - 4) +
         "\" font-size=\"11\" text-anchor=\"end\">" + html_escape(format_rfc3339_ns(t1)) +
         "</text>\n</svg>\n<p>circle: kernel or DCGM event, square: NCCL, triangle: prolog/epilog or fabric "
         "manager</p>\n";
    h += "<h2>Findings</h2>\n<table><tr><th>time (UTC)</th><th>node</th><th>severity</th><th>what</th><th>action</th>"
         "<th>first line</th></tr>\n";
    for (const auto& f : fs)
        h += "<tr><td>" + html_escape(format_rfc3339_ns(f.ts_ns)) + "</td><td>" + html_escape(f.node) +
             "</td><td class=\"sev\" style=\"color:" + color(f.severity) + "\">" +
             std::string(events::severity_name(f.severity)) + "</td><td>" + html_escape(f.title) +
             (f.count > 1 ? " (x" + std::to_string(f.count) + ")" : "") + "</td><td>" + html_escape(f.action) +
             "</td><td><code>" + html_escape(f.quote) + "</code></td></tr>\n";
    h +=
        "</table>\n<p>Every record is in timeline.txt and under nodes/ and nccl/ in this bundle.</p>\n</body></html>\n";
    return h;
}

}  // namespace jobtrail::forensics
