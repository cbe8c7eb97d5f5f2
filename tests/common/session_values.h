// Saved values for the session log's suites (tst_session_store, tst_session_crash_safety): a
// named tensor value, and runs of deterministic pattern values that a reader can check whole.
#pragma once

#include <cstring>
#include <string>

#include "core/store/session_store.h"
#include "core/trace/trace_record.h"

namespace shardscope::test {

inline trace::SavedValue tensorValue(const std::string& name, HostTensor t) {
  trace::SavedValue v;
  v.name = name;
  v.tensor = std::move(t);
  return v;
}

// A deterministic value whose bytes follow from the run and value index (a writer and a reader
// in other threads or processes agree on it).
inline HostTensor patternTensor(int64_t run, int index, int64_t floats) {
  HostTensor t;
  t.dtype = DType::F32;
  t.shape = {floats};
  t.bytes.resize(size_t(floats) * 4);
  for (int64_t i = 0; i < floats; ++i) {
    const float x = float(run * 1000 + index) + float(i) * 1e-3f;
    std::memcpy(t.bytes.data() + i * 4, &x, 4);
  }
  return t;
}

inline trace::RunResult patternResult(int64_t run, int values, int64_t floats) {
  trace::RunResult r;
  r.traces.resize(1);
  for (int i = 0; i < values; ++i)
    r.traces[0].values.push_back(
        tensorValue("v" + std::to_string(i), patternTensor(run, i, floats)));
  return r;
}

// Whether a run holds exactly the values patternResult made for it.
inline bool matchesPattern(const store::RunRecord& r, int values, int64_t floats) {
  if (r.result.traces.size() != 1 || int(r.result.traces[0].values.size()) != values) return false;
  for (int i = 0; i < values; ++i) {
    if (r.result.traces[0].values[size_t(i)].tensor.bytes !=
        patternTensor(r.summary.id, i, floats).bytes)
      return false;
  }
  return true;
}

}  // namespace shardscope::test
