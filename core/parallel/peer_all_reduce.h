// PeerAllReduce: the all-reduce of small tensors (a decode step's rows) for an NcclGroup whose
// GPUs can read each other's memory, as vLLM's custom all-reduce: one kernel per call, one-shot
// (every rank reads every peer's staging buffer over NVLink and sums in rank order), recordable
// in CUDA graphs. NCCL's latency for an 8 KB all-reduce is tens of microseconds; this is a few.
// Ranks are threads of one process, so peers' buffers are plain device pointers once peer access
// is enabled (no IPC handles needed). Built only with the fused CUDA kernels.
//
// Owns, per rank, a staging buffer of maxBytes and a zeroed signal block on that rank's GPU, and
// one host-mapped abort flag that abort() sets so that a kernel waiting for a rank that never
// comes returns (the group is then replaced, as after an NCCL abort).
#pragma once

#include <ATen/ATen.h>
#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

namespace shardscope {

class PeerAllReduce {
 public:
  // Nullptr, with `why` saying which pair of devices lacks peer access, when it cannot work.
  static std::unique_ptr<PeerAllReduce> create(const std::vector<int>& devices, size_t maxBytes,
                                               std::string& why);
  // Allocates the buffers; create() checks peer access first.
  PeerAllReduce(std::vector<int> devices, size_t maxBytes);
  ~PeerAllReduce();
  PeerAllReduce(const PeerAllReduce&) = delete;
  PeerAllReduce& operator=(const PeerAllReduce&) = delete;

  // Whether `t` can go this way: a CUDA float, bf16 or fp16 tensor, contiguous, 16-byte aligned,
  // of at most maxBytes in whole 16-byte vectors.
  bool accepts(const at::Tensor& t) const;
  // Enqueues the all-reduce of `t` (in place) on `stream` for `rank`; every rank must call it with
  // the same shape and dtype. Throws when the launch fails.
  void launch(const at::Tensor& t, int rank, cudaStream_t stream) const;
  // Makes waiting kernels return, now and in every later launch. Callable from any thread.
  void abort();

 private:
  struct DeviceMemory;

  std::vector<int> devices_;
  size_t maxBytes_;
  std::vector<std::unique_ptr<DeviceMemory>> staging_, signals_;
  struct HostFlag;
  std::unique_ptr<HostFlag> abortFlag_;
};

}  // namespace shardscope
