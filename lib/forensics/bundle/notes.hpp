#pragma once

#include <string>

#include "forensics/bundle.hpp"
#include "forensics/bundle/collection.hpp"

namespace jobtrail::forensics::bundle {

// What summary.txt says after the analysis: why the bundle may lack records (a recent window,
// Loki's lookback, nodes without records, an unusable nodelist).
std::string summary_notes(const BundleOptions& o, const Gathered& g);

// Why a bundle is partial (missing nodes, failed queries), for the error line.
std::string partial_reason(const Gathered& g);

}  // namespace jobtrail::forensics::bundle
