#include "capture_stream.h"

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace shardscope {

namespace {

struct Leasable {
  c10::cuda::CUDAStream stream;
  bool held = false;
};

// Every device's capture streams in the order they were first leased; rank threads lease and
// return them concurrently.
std::mutex leasesMutex;
std::map<c10::DeviceIndex, std::vector<Leasable>>& leases() {
  static std::map<c10::DeviceIndex, std::vector<Leasable>> all;
  return all;
}

// The index of the stream leased, with `stream` set to it.
size_t lease(c10::DeviceIndex device, c10::cuda::CUDAStream& stream) {
  std::lock_guard lock(leasesMutex);
  std::vector<Leasable>& streams = leases()[device];
  size_t i = 0;
  while (i < streams.size() && streams[i].held) ++i;
  if (i == streams.size())
    streams.push_back({c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device)});
  streams[i].held = true;
  stream = streams[i].stream;
  return i;
}

}  // namespace

CaptureStream::CaptureStream(c10::DeviceIndex device)
    : device_(device), index_(0), stream_(c10::cuda::getDefaultCUDAStream(device)) {
  index_ = lease(device, stream_);
}

c10::cuda::CUDAStream CaptureStream::stream() const {
  const char* v = std::getenv("SHARDSCOPE_CAPTURE_STREAM");
  if (v && std::strcmp(v, "pool") == 0)
    return c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device_);
  return stream_;
}

CaptureStream::~CaptureStream() {
  std::lock_guard lock(leasesMutex);
  leases()[device_][index_].held = false;
}

}  // namespace shardscope
