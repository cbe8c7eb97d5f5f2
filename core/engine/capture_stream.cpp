#include "capture_stream.h"

#include <memory>

#include "../runtime_switches.h"

namespace shardscope {

namespace {

// Every device's capture streams, in the order they were first leased. The function's own
// reference is destroyed at exit; leases still held then keep the registry alive.
std::shared_ptr<CaptureStream::Registry> captureStreams() {
  static const std::shared_ptr<CaptureStream::Registry> registry =
      CaptureStream::Registry::create([](const c10::DeviceIndex& device) {
        return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device);
      });
  return registry;
}

}  // namespace

CaptureStream::CaptureStream(c10::DeviceIndex device)
    : device_(device), lease_(captureStreams()->lease(device)) {}

c10::cuda::CUDAStream CaptureStream::stream() const {
  if (RuntimeSwitches::current().captureStream == CaptureStreamSource::Pool)
    return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_);
  return lease_.value();
}

}  // namespace shardscope
