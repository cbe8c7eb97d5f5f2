// RuntimeSwitches: the SHARDSCOPE_* environment variables that choose between code paths giving
// the same results, kept so a benchmark or a timeline can compare them, or a user can rule one out
// when chasing a wrong result. They are read in this one place, once, and checked: a value a
// switch does not take is an Error naming the ones it does (the engine reads them when it starts,
// so a typo fails there, not silently in a kernel). A process that compares settings, such as a
// test, sets the variable and calls reload() (tests/common/scoped_switch.h does both).
//
// Plain C++ (no LibTorch, no CUDA headers): the kernels' host code reads it too.
#pragma once

#include "parallel/all_reduce_algorithm.h"

namespace shardscope {

// SHARDSCOPE_CAPTURE_STREAM: where a rank records its CUDA graphs.
enum class CaptureStreamSource { Leased, Pool };

struct RuntimeSwitches {
  // The trace layer.
  bool batchCalls = true;  // BATCH_CALLS=0: deferred row-wise module calls run one by one

  // The engine.
  bool decodeAhead = true;  // DECODE_AHEAD=0: no greedy step launched before the last is read
  bool segmentFusedFirst =
      true;              // SEGMENT_FUSED=0: a segmented layer never records fused attention
  int graphWarmups = 0;  // GRAPH_WARMUPS=N (N > 0): eager runs before a capture; 0: default
  CaptureStreamSource captureStream = CaptureStreamSource::Leased;  // CAPTURE_STREAM=pool|leased
  double collectiveTimeoutSeconds = 0;  // COLLECTIVE_TIMEOUT=S (S > 0); 0: EngineOptions decides
  AllReduceAlgorithm allReduce = AllReduceAlgorithm::Auto;  // ALL_REDUCE=auto|peer|nccl|...

  // The layers.
  bool batchPromptAttention = true;  // BATCH_PROMPT_ATTENTION=0: equal prompts attend one by one

  // The CUDA kernels (each 0 falls back to the unfused path, same bits).
  bool fusedDecode = true;            // FUSED_DECODE=0: the decode layer's modules one by one
  bool fusedAttention = true;         // FUSED_ATTENTION=0: the cache write and attention apart
  bool fusedMoeNorm = true;           // FUSED_MOE_NORM=0: the post-attention norm before the router
  bool moeOneToken = true;            // MOE_ONE_TOKEN=0: one token's experts in the general kernel
  bool moeWide = true;                // MOE_WIDE=0: the narrow expert kernels for one token
  bool programmaticLaunch = true;     // PDL=0: no kernel overlaps the one before it
  bool fullNormGemvGrid = false;      // NORM_GEMV_GRID=full: one block per row range, not per SM
  bool groupAttentionBlocks = false;  // ATTENTION_BLOCKS=group: a KV head's group a block always

  // The environment's settings; an Error for a value a switch does not take.
  static RuntimeSwitches fromEnvironment();
  // The settings read last (on first use); the reference stays valid after a reload().
  static const RuntimeSwitches& current();
  // Reads the environment again (after a process changed a variable to compare settings).
  static void reload();
};

}  // namespace shardscope
