// The current device's SMs, compute capability and the most shared memory a block may opt into,
// asked once a device: a launch that sizes its grid by them would otherwise ask the driver on
// every decode step's eager launch.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <mutex>

namespace shardscope::kernels {

struct DeviceLimits {
  int sms = 0, major = 0, sharedOptin = 0;
};

// All zero when the runtime cannot answer (a launch then takes its general path).
inline DeviceLimits currentDeviceLimits() {
  static std::mutex mutex;
  static std::map<int, DeviceLimits> known;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return {};
  const std::lock_guard<std::mutex> lock(mutex);
  if (const auto it = known.find(device); it != known.end()) return it->second;
  DeviceLimits d;
  if (cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&d.sharedOptin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) !=
          cudaSuccess)
    return {};
  return known.emplace(device, d).first->second;
}

}  // namespace shardscope::kernels
