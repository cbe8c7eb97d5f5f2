#include "runtime_switches.h"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "error.h"

namespace shardscope {
namespace {

template <typename T>
struct Choice {
  const char* name;
  T value;
};

const char* valueOf(const char* variable) {
  const char* v = std::getenv(variable);
  return v && *v ? v : nullptr;  // empty counts as unset, as in `VAR= command`
}

[[noreturn]] void refuse(const char* variable, const char* value, const std::string& takes) {
  throw Error(std::string(variable) + "=" + value + " is not a setting of this switch: it takes " +
              takes + ", or leave it unset for the default");
}

// The variable's value among `choices`; `unset` when it is unset.
template <typename T, size_t N>
T choose(const char* variable, const Choice<T> (&choices)[N], T unset) {
  const char* v = valueOf(variable);
  if (!v) return unset;
  std::string takes;
  for (const Choice<T>& c : choices) {
    if (std::strcmp(v, c.name) == 0) return c.value;
    takes += (takes.empty() ? "" : ", ") + std::string(c.name);
  }
  refuse(variable, v, takes);
}

bool onOff(const char* variable, bool unset) {
  static constexpr Choice<bool> kOnOff[] = {{"0", false}, {"1", true}};
  return choose(variable, kOnOff, unset);
}

// A positive number (an integer where `integral`), 0 when unset.
double positive(const char* variable, bool integral) {
  const char* v = valueOf(variable);
  if (!v) return 0;
  char* end = nullptr;
  const double x = std::strtod(v, &end);
  // Below 2^31 so that either cast is defined.
  if (end == v || *end || !(x > 0) || !(x < 2147483648.0) || (integral && x != double(int64_t(x))))
    refuse(variable, v,
           integral ? "a positive integer below 2^31" : "a positive number below 2^31");
  return x;
}

AllReduceAlgorithm allReduceAlgorithm() {
  static constexpr Choice<AllReduceAlgorithm> kAlgorithms[] = {
      {kAllReduceAlgorithmNames[0], AllReduceAlgorithm::Auto},
      {kAllReduceAlgorithmNames[1], AllReduceAlgorithm::Peer},
      {kAllReduceAlgorithmNames[2], AllReduceAlgorithm::Nccl},
      {kAllReduceAlgorithmNames[3], AllReduceAlgorithm::NcclSymmetric}};
  return choose("SHARDSCOPE_ALL_REDUCE", kAlgorithms, AllReduceAlgorithm::Auto);
}

// The settings readers see, and every earlier one: a reader may still hold a reference to one that
// reload() replaced (it runs a handful of times in a process, so keeping them costs nothing).
std::atomic<const RuntimeSwitches*> latest{nullptr};
std::mutex readingsMutex;
// Never destroyed: a thread still launching kernels as the process exits reads `latest`.
std::vector<std::unique_ptr<const RuntimeSwitches>>& readings() {
  static auto* kept = new std::vector<std::unique_ptr<const RuntimeSwitches>>;
  return *kept;
}

}  // namespace

RuntimeSwitches RuntimeSwitches::fromEnvironment() {
  RuntimeSwitches s;
  s.batchCalls = onOff("SHARDSCOPE_BATCH_CALLS", true);
  s.decodeAhead = onOff("SHARDSCOPE_DECODE_AHEAD", true);
  s.segmentFusedFirst = onOff("SHARDSCOPE_SEGMENT_FUSED", true);
  s.graphWarmups = int(positive("SHARDSCOPE_GRAPH_WARMUPS", true));
  static constexpr Choice<CaptureStreamSource> kStreams[] = {
      {"leased", CaptureStreamSource::Leased}, {"pool", CaptureStreamSource::Pool}};
  s.captureStream = choose("SHARDSCOPE_CAPTURE_STREAM", kStreams, CaptureStreamSource::Leased);
  s.collectiveTimeoutSeconds = positive("SHARDSCOPE_COLLECTIVE_TIMEOUT", false);
  s.allReduce = allReduceAlgorithm();
  s.batchPromptAttention = onOff("SHARDSCOPE_BATCH_PROMPT_ATTENTION", true);
  s.fusedDecode = onOff("SHARDSCOPE_FUSED_DECODE", true);
  s.fusedAttention = onOff("SHARDSCOPE_FUSED_ATTENTION", true);
  s.fusedMoeNorm = onOff("SHARDSCOPE_FUSED_MOE_NORM", true);
  s.moeOneToken = onOff("SHARDSCOPE_MOE_ONE_TOKEN", true);
  s.moeWide = onOff("SHARDSCOPE_MOE_WIDE", true);
  s.programmaticLaunch = onOff("SHARDSCOPE_PDL", true);
  static constexpr Choice<bool> kGrids[] = {{"sm", false}, {"full", true}};
  s.fullNormGemvGrid = choose("SHARDSCOPE_NORM_GEMV_GRID", kGrids, false);
  static constexpr Choice<bool> kAttentionBlocks[] = {{"auto", false}, {"group", true}};
  s.groupAttentionBlocks = choose("SHARDSCOPE_ATTENTION_BLOCKS", kAttentionBlocks, false);
  return s;
}

const RuntimeSwitches& RuntimeSwitches::current() {
  if (const RuntimeSwitches* s = latest.load(std::memory_order_acquire)) return *s;
  reload();
  return *latest.load(std::memory_order_acquire);
}

void RuntimeSwitches::reload() {
  auto s = std::make_unique<const RuntimeSwitches>(fromEnvironment());  // throws before any change
  std::lock_guard<std::mutex> lock(readingsMutex);
  latest.store(s.get(), std::memory_order_release);
  readings().push_back(std::move(s));
}

}  // namespace shardscope
