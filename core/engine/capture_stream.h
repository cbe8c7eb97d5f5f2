// CaptureStream: the stream a rank records its CUDA graphs on, leased from a per-device list for
// as long as its owner lives. One stream, not a new pool stream a capture: once a process has
// captured on a second stream of a device, every graph on that device, old ones too, replays
// without programmatic dependent launch's early starts (a median 0.48 us between kernels instead
// of 0.13 us, about 0.14 ms a 28-layer prefill; bench/RESULTS.md, interpretability run 9). Ranks
// that share a device at the same time (a local group on one GPU) each lease their own stream, so
// their thread-local captures never meet on one. Built only with LibTorch's CUDA.
#pragma once

#include <c10/cuda/CUDAStream.h>

#include <cstddef>

#include "lease_registry.h"

namespace shardscope {

class CaptureStream {
 public:
  using Registry = LeaseRegistry<c10::DeviceIndex, c10::cuda::CUDAStream>;

  // Leases the first of `device`'s capture streams that no live CaptureStream holds, adding a
  // stream from LibTorch's pool when all are held. Destroying it returns the lease; the stream
  // itself lives as long as the process.
  explicit CaptureStream(c10::DeviceIndex device);
  CaptureStream(const CaptureStream&) = delete;
  CaptureStream& operator=(const CaptureStream&) = delete;

  // The stream to record on: the leased one; with SHARDSCOPE_CAPTURE_STREAM=pool a new stream
  // from LibTorch's pool each call instead (how graphs were recorded before, kept to measure the
  // difference).
  c10::cuda::CUDAStream stream() const;
  // Which of the device's capture streams this is (0 for the first): for tests.
  size_t index() const { return lease_.index(); }

 private:
  c10::DeviceIndex device_;
  Registry::Lease lease_;
};

}  // namespace shardscope
