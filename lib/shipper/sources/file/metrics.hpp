#pragma once

#include "shipper/metrics.hpp"

namespace jobtrail::shipper {

// The file sources' (the file and pods kinds, counting together).
struct FileSourceMetrics {
    explicit FileSourceMetrics(Metrics& m)
        : partial_lines_cut(m.counter("jobtrail_shipper_partial_lines_cut_total",
                                      "Unterminated lines shipped before their end, their rest as new lines, to keep "
                                      "a file source under its max_partial_bytes.")),
          // CRI (container) logs: lines that were not CRI, shipped as they are; P lines handed out
          // before their F (longer than max_line_bytes, or left at the end of a rotated file).
          cri_malformed(m.counter("jobtrail_shipper_cri_malformed_lines_total",
                                  "Lines of CRI (container) log files that were not CRI lines, shipped as they are.")),
          cri_lines_cut(m.counter("jobtrail_shipper_cri_lines_cut_total",
                                  "CRI partial lines shipped before their F line: longer than max_line_bytes, or left "
                                  "at the end of a rotated file.")),
          files_refused(m.counters("jobtrail_shipper_files_refused_total",
                                   "Files matching a source's paths that were not read (a symlink, FIFO, device, hard "
                                   "link or another owner's file), by reason.",
                                   {"reason"})) {}
    metrics::Counter &partial_lines_cut, &cri_malformed, &cri_lines_cut;
    metrics::CounterFamily& files_refused;
};

}  // namespace jobtrail::shipper
