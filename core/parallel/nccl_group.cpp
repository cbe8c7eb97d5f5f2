#include "nccl_group.h"

#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <thread>

#include "../error.h"

namespace shardscope {

struct NcclGroup::Comm {
  ncclComm_t comm = nullptr;
  int device = 0;
  std::atomic<bool> aborted{false};
  std::string reason;
  ~Comm() {
    if (!comm) return;
    if (aborted) {
      ncclCommAbort(comm);
    } else {
      ncclCommDestroy(comm);
    }
  }
};

namespace {

ncclDataType_t ncclType(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return ncclFloat32;
    case at::kHalf:
      return ncclFloat16;
    case at::kBFloat16:
      return ncclBfloat16;
    case at::kDouble:
      return ncclFloat64;
    case at::kLong:
      return ncclInt64;
    case at::kInt:
      return ncclInt32;
    case at::kByte:
    case at::kBool:
      return ncclUint8;
    case at::kChar:
      return ncclInt8;
    default:
      break;
  }
  throw Error(std::string("NCCL cannot exchange tensors of dtype ") + c10::toString(t));
}

}  // namespace

std::vector<std::unique_ptr<NcclGroup>> NcclGroup::create(int size) {
  int devices = 0;
  cudaGetDeviceCount(&devices);
  if (size > devices) {
    throw Error("NCCL needs one GPU per rank: asked for " + std::to_string(size) + " ranks but " +
                std::to_string(devices) +
                " GPU(s) are visible; use a smaller tp or the local group (several ranks on one "
                "GPU)");
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) throw Error("ncclGetUniqueId failed");
  std::vector<std::unique_ptr<Comm>> comms;
  for (int r = 0; r < size; ++r) {
    comms.push_back(std::make_unique<Comm>());
    comms.back()->device = r;
  }
  ncclGroupStart();
  for (int r = 0; r < size; ++r) {
    cudaSetDevice(r);
    ncclCommInitRank(&comms[r]->comm, size, id, r);
  }
  const ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess) {
    throw Error(std::string("creating NCCL communicators failed: ") + ncclGetErrorString(res));
  }
  std::vector<std::unique_ptr<NcclGroup>> groups;
  for (int r = 0; r < size; ++r)
    groups.push_back(std::make_unique<NcclGroup>(r, size, std::move(comms[r])));
  return groups;
}

NcclGroup::NcclGroup(int rank, int size, std::unique_ptr<Comm> comm)
    : rank_(rank), size_(size), comm_(std::move(comm)) {}

NcclGroup::~NcclGroup() = default;

void NcclGroup::check(int result, const char* op) {
  if (result == ncclSuccess) return;
  throw Error(std::string("NCCL ") + op + " failed on rank " + std::to_string(rank_) + ": " +
              ncclGetErrorString(ncclResult_t(result)));
}

void NcclGroup::waitFor(const char* op) {
  if (comm_->aborted) throw CollectiveAborted(std::string("collective aborted: ") + comm_->reason);
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(comm_->device).stream();
  // While a CUDA graph is being captured nothing runs: the replay's caller waits instead.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
      capture != cudaStreamCaptureStatusNone)
    return;
  const auto deadline = std::chrono::steady_clock::now() + options().timeout;
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    if (comm_->aborted)
      throw CollectiveAborted(std::string("collective aborted: ") + comm_->reason);
    if (std::chrono::steady_clock::now() > deadline) {
      abort(std::string("timed out in ") + op);
      throw CollectiveAborted(std::string("NCCL ") + op + " timed out on rank " +
                              std::to_string(rank_));
    }
    std::this_thread::yield();
  }
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(comm_->comm, &async);
  check(async, op);
}

at::Tensor NcclGroup::allGather(const at::Tensor& local, int64_t dim) {
  if (size_ == 1) return local.clone();
  at::Tensor src = local.contiguous();
  std::vector<int64_t> shape{size_};
  for (int64_t s : src.sizes()) shape.push_back(s);
  at::Tensor stacked = at::empty(shape, src.options());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(comm_->device).stream();
  check(ncclAllGather(src.data_ptr(), stacked.data_ptr(), src.numel(), ncclType(src.scalar_type()),
                      comm_->comm, stream),
        "allGather");
  waitFor("allGather");
  return at::cat(stacked.unbind(0), dim);
}

void NcclGroup::allReduceSum(at::Tensor& tensor) {
  if (size_ == 1) return;
  at::Tensor buf = tensor.is_contiguous() ? tensor : tensor.contiguous();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(comm_->device).stream();
  check(ncclAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), ncclType(buf.scalar_type()),
                      ncclSum, comm_->comm, stream),
        "allReduceSum");
  waitFor("allReduceSum");
  if (!buf.is_same(tensor)) tensor.copy_(buf);
}

void NcclGroup::broadcast(at::Tensor& tensor, int root) {
  if (size_ == 1) return;
  at::Tensor buf = tensor.is_contiguous() ? tensor : tensor.contiguous();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(comm_->device).stream();
  check(ncclBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), ncclType(buf.scalar_type()),
                      root, comm_->comm, stream),
        "broadcast");
  waitFor("broadcast");
  if (!buf.is_same(tensor)) tensor.copy_(buf);
}

void NcclGroup::barrier() {
  at::Tensor one = at::ones({1}, at::TensorOptions().device(at::kCUDA, comm_->device));
  allReduceSum(one);
}

void NcclGroup::abort(const std::string& reason) {
  if (comm_->aborted.exchange(true)) return;
  comm_->reason = reason;
}

void NcclGroup::reset() {
  if (comm_->aborted) {
    throw Error("an aborted NCCL communicator cannot be reused; the engine must be restarted");
  }
}

}  // namespace shardscope
