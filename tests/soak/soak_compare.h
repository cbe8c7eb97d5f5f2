// compareOutcomes: what one trace script did at a reference tensor-parallel size (tp=1) against
// what it did at another (tp=2), as plain data (trace::RunResult; no LibTorch).
//
// The runs agree when
//  - both ended the same way: no error, or errors with identical text;
//  - they finished the same traces, with the same invokes and prompts;
//  - every saved value has the same name, kind, dtype and shape; floating values are within
//    `tolerance` as max |a - b| / max |b| (b: the reference), integer and bool values are equal,
//    non-tensor values have the same repr;
//  - the printed lines are identical;
//  - the generated ids are identical, or differ at a NEAR-TIE. Invoke j's logits are taken from
//    the saved list named logitsListName(j) (one row per step from step 0, as the generator
//    writes them). The ids of invoke j first differ at step k; that is a near-tie, not a failure,
//    when the logits of steps 0..k agree within the tolerance, each run's id at step k is the one
//    the engine's sampler takes from that run's own logits (greedy: the argmax; sampled: the same
//    seeded draw, replayed), and, greedy, the reference's top-2 gap at step k is below twice the
//    max |a - b| of that row. (Sampled ids can part at any gap: one uniform draw against
//    cumulative probabilities that moved within the tolerance.)
//    After a near-tie the diverged invoke's other values (by name: trace_script_generator.h's
//    invokeOfValue) and the script's printed lines are not compared (later steps ran on other
//    tokens); they are counted as skipped. The other invokes' values are still compared.
#pragma once

#include <string>
#include <vector>

#include "core/trace/trace_record.h"

namespace shardscope::soak {

struct RunOutcome {
  trace::RunResult result;
  std::string error;  // "ScriptError: ..." / "Error: ..." when the run threw; "" otherwise
  double seconds = 0;
};

struct CompareOptions {
  double tolerance = 1e-4;  // max |a - b| / max |b| for floating values
};

// The tolerance the soak uses for a run dtype: f32 1e-4; bf16 5e-2 and f16 1e-2 (differently
// sharded sums round differently: tp=2 vs tp=1 on the Qwen3-8B shapes differs by up to 2.4e-2 in
// bf16, bench/RESULTS.md).
double defaultTolerance(const std::string& dtype);

struct Comparison {
  std::vector<std::string> mismatches;  // empty: the runs agree
  std::vector<std::string> nearTies;    // one line per near-tie
  int valuesCompared = 0;
  int valuesSkipped = 0;
  bool errorsCompared = false;  // both runs ended with the same error
  double maxRelativeError = 0;  // over the floating values compared
  std::string worstValue;       // "trace 0: r1[2]", the value with that error

  bool ok() const { return mismatches.empty(); }
};

Comparison compareOutcomes(const RunOutcome& reference, const RunOutcome& candidate,
                           const CompareOptions& options = {});

// max |a - b| / max |b| (max |a - b| when b is all zero); both must have the same element count.
double maxRelativeError(const HostTensor& a, const HostTensor& b);

}  // namespace shardscope::soak
