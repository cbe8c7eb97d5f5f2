#include "peer_all_reduce.h"

#include <cuda_runtime.h>

#include "../error.h"
#include "../kernels/peer_all_reduce_kernel.h"

namespace shardscope {

namespace {

void checkCuda(cudaError_t e, const std::string& what) {
  if (e == cudaSuccess) return;
  throw Error("peer all-reduce: " + what + " failed: " + cudaGetErrorString(e));
}

}  // namespace

// cudaMalloc'd bytes on one device, freed there.
struct PeerAllReduce::DeviceMemory {
  DeviceMemory(int device, size_t bytes) : device(device) {
    checkCuda(cudaSetDevice(device), "cudaSetDevice");
    checkCuda(cudaMalloc(&ptr, bytes),
              "allocating " + std::to_string(bytes) + " bytes on GPU " + std::to_string(device));
    checkCuda(cudaMemset(ptr, 0, bytes), "zeroing");
  }
  ~DeviceMemory() {
    int current = 0;
    cudaGetDevice(&current);
    cudaSetDevice(device);
    cudaFree(ptr);
    cudaSetDevice(current);
  }
  int device;
  void* ptr = nullptr;
};

// One int in pinned host memory that every GPU reads through its mapping.
struct PeerAllReduce::HostFlag {
  HostFlag() {
    void* p = nullptr;
    checkCuda(cudaHostAlloc(&p, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable),
              "allocating the abort flag");
    value = static_cast<volatile int*>(p);
    *value = 0;
  }
  ~HostFlag() { cudaFreeHost(const_cast<int*>(value)); }
  volatile int* value = nullptr;
};

PeerAllReduce::PeerAllReduce(std::vector<int> devices, size_t maxBytes)
    : devices_(std::move(devices)), maxBytes_(maxBytes) {
  int current = 0;
  cudaGetDevice(&current);
  for (int d : devices_) {
    staging_.push_back(std::make_unique<DeviceMemory>(d, maxBytes));
    signals_.push_back(std::make_unique<DeviceMemory>(d, sizeof(kernels::PeerSignal)));
  }
  abortFlag_ = std::make_unique<HostFlag>();
  cudaSetDevice(current);
}

PeerAllReduce::~PeerAllReduce() = default;

std::unique_ptr<PeerAllReduce> PeerAllReduce::create(const std::vector<int>& devices,
                                                     size_t maxBytes, std::string& why) {
  if (devices.size() < 2 || devices.size() > size_t(kernels::kPeerMaxRanks)) {
    why = "the peer all-reduce takes 2 to " + std::to_string(kernels::kPeerMaxRanks) + " GPUs";
    return nullptr;
  }
  int current = 0;
  cudaGetDevice(&current);
  for (int a : devices) {
    for (int b : devices) {
      if (a == b) continue;
      int can = 0;
      checkCuda(cudaDeviceCanAccessPeer(&can, a, b), "cudaDeviceCanAccessPeer");
      if (!can) {
        why = "GPU " + std::to_string(a) + " cannot access GPU " + std::to_string(b) + "'s memory";
        return nullptr;
      }
      checkCuda(cudaSetDevice(a), "cudaSetDevice");
      const cudaError_t e = cudaDeviceEnablePeerAccess(b, 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();  // enabled before (LibTorch does it for copies): fine
      } else {
        checkCuda(
            e, "enabling peer access from GPU " + std::to_string(a) + " to " + std::to_string(b));
      }
    }
  }
  cudaSetDevice(current);
  return std::make_unique<PeerAllReduce>(devices, maxBytes);
}

bool PeerAllReduce::accepts(const at::Tensor& t) const {
  const auto type = t.scalar_type();
  if (!t.is_cuda() || !t.is_contiguous()) return false;
  if (type != at::kFloat && type != at::kBFloat16 && type != at::kHalf) return false;
  const size_t bytes = size_t(t.numel()) * t.element_size();
  return bytes <= maxBytes_ && bytes % 16 == 0 &&
         reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0;
}

void PeerAllReduce::launch(const at::Tensor& t, int rank, cudaStream_t stream) const {
  kernels::PeerAllReduceArgs a;
  a.dtype = t.scalar_type() == at::kFloat      ? kernels::DType::Float
            : t.scalar_type() == at::kBFloat16 ? kernels::DType::BFloat16
                                               : kernels::DType::Half;
  a.data = t.data_ptr();
  a.count = t.numel();
  a.rank = rank;
  a.ranks = int(devices_.size());
  for (size_t r = 0; r < devices_.size(); ++r) {
    a.staging[r] = staging_[r]->ptr;
    a.signals[r] = static_cast<kernels::PeerSignal*>(signals_[r]->ptr);
  }
  a.abortFlag = abortFlag_->value;
  checkCuda(kernels::peerAllReduce(a, stream), "launching on rank " + std::to_string(rank) + " (" +
                                                   std::to_string(t.numel()) + " elements)");
}

void PeerAllReduce::abort() {
  *abortFlag_->value = 1;
}

}  // namespace shardscope
