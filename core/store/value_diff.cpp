#include "value_diff.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "value_summary.h"

namespace shardscope::store {
namespace {

std::string number(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", x);
  return buf;
}

std::string describe(const trace::SavedValue& v) {
  if (!v.isTensor()) return "a non-tensor value";
  return std::string(dtypeName(v.tensor.dtype)) + " " + v.tensor.shapeString();
}

// Both stored only as summaries (over the cap): compare what was kept.
ValueDiff compareSummaries(const trace::ValueSummary& a, const trace::ValueSummary& b) {
  ValueDiff d;
  d.identical = a.min == b.min && a.max == b.max && a.mean == b.mean && a.norm == b.norm &&
                a.nonFinite == b.nonFinite;
  d.maxAbs = std::max({std::abs(a.min - b.min), std::abs(a.max - b.max), std::abs(a.mean - b.mean),
                       std::abs(a.norm - b.norm)});
  const double scale = std::max(std::abs(a.min), std::abs(a.max));
  d.relative = scale > 0 ? d.maxAbs / scale : 0;
  d.detail = d.identical ? "summaries identical (values over the cap were not stored)"
                         : "summaries differ: norm " + number(a.norm) + " -> " + number(b.norm) +
                               ", mean " + number(a.mean) + " -> " + number(b.mean);
  return d;
}

}  // namespace

ValueDiff compareValues(const trace::SavedValue& before, const trace::SavedValue& after) {
  ValueDiff d;
  if (before.isTensor() != after.isTensor() ||
      (before.isTensor() &&
       (before.tensor.dtype != after.tensor.dtype || before.tensor.shape != after.tensor.shape))) {
    d.comparable = false;
    d.detail = "was " + describe(before) + ", now " + describe(after);
    return d;
  }
  if (!before.isTensor()) {
    d.identical = *before.repr == *after.repr;
    d.detail = d.identical ? "identical" : "was " + *before.repr + ", now " + *after.repr;
    return d;
  }
  if (before.summary || after.summary) {
    const trace::ValueSummary a = before.summary ? *before.summary : summarize(before.tensor);
    const trace::ValueSummary b = after.summary ? *after.summary : summarize(after.tensor);
    return compareSummaries(a, b);
  }
  d.identical = before.tensor.bytes == after.tensor.bytes;
  if (d.identical) {
    d.detail = "bit-identical";
    return d;
  }
  double scale = 0;
  const int64_t n = before.tensor.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double a = before.tensor.element(i), b = after.tensor.element(i);
    scale = std::max(scale, std::abs(a));
    const double diff = std::abs(a - b);
    if (std::isnan(diff) && !(std::isnan(a) && std::isnan(b))) {
      d.maxAbs = INFINITY;
    } else if (diff > d.maxAbs) {
      d.maxAbs = diff;
    }
  }
  d.relative = scale > 0 ? d.maxAbs / scale : (d.maxAbs > 0 ? INFINITY : 0);
  d.detail = "differs: max abs " + number(d.maxAbs) + ", relative " + number(d.relative);
  return d;
}

}  // namespace shardscope::store
