#include "value_summary.h"

#include <cmath>
#include <limits>

namespace shardscope::store {

trace::ValueSummary summarize(const HostTensor& t) {
  trace::ValueSummary s;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo, sum = 0, squares = 0;
  int64_t finite = 0;
  const int64_t n = t.numel();
  for (int64_t i = 0; i < n; ++i) {
    const double x = t.element(i);
    if (!std::isfinite(x)) {
      ++s.nonFinite;
      continue;
    }
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    sum += x;
    squares += x * x;
    ++finite;
  }
  if (finite == 0) return s;
  s.min = lo;
  s.max = hi;
  s.mean = sum / double(finite);
  s.norm = std::sqrt(squares);
  return s;
}

}  // namespace shardscope::store
