#include "nccl_group.h"

#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "../error.h"
#include "collective_board.h"

namespace shardscope {

struct NcclGroup::Shared {
  explicit Shared(int size) : board(size) {}
  ~Shared() {
    if (aborter.joinable()) {
      aborter.join();  // returns once every graph recorded with the communicators is destroyed
      return;
    }
    for (size_t r = 0; r < comms.size(); ++r) {
      if (!comms[r]) continue;
      cudaSetDevice(devices[r]);
      ncclCommDestroy(comms[r]);
    }
  }

  std::vector<ncclComm_t> comms;
  std::vector<int> devices;
  // Shared while a rank calls into NCCL; exclusive while abort() sets the flag.
  std::shared_mutex mutex;
  std::atomic<bool> aborted{false};
  std::string reason;  // set once, under the exclusive lock
  std::thread aborter;
  CollectiveBoard board;
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
  std::vector<int> devices;
  for (int r = 0; r < size; ++r) devices.push_back(r);
  return create(devices);
}

std::vector<std::unique_ptr<NcclGroup>> NcclGroup::create(const std::vector<int>& devices) {
  const int size = int(devices.size());
  int visible = 0;
  cudaGetDeviceCount(&visible);
  for (int d : devices) {
    if (d >= visible) {
      throw Error("NCCL needs one GPU per rank: rank on GPU " + std::to_string(d) + " but " +
                  std::to_string(visible) +
                  " GPU(s) are visible; use fewer ranks (tp x pp) or the local group (several "
                  "ranks on one GPU)");
    }
  }
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) throw Error("ncclGetUniqueId failed");
  auto shared = std::make_shared<Shared>(size);
  shared->comms.assign(size_t(size), nullptr);
  shared->devices = devices;
  ncclGroupStart();
  for (int r = 0; r < size; ++r) {
    cudaSetDevice(devices[size_t(r)]);
    ncclCommInitRank(&shared->comms[size_t(r)], size, id, r);
  }
  const ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess) {
    throw Error(std::string("creating NCCL communicators failed: ") + ncclGetErrorString(res));
  }
  std::vector<std::unique_ptr<NcclGroup>> groups;
  for (int r = 0; r < size; ++r) groups.push_back(std::make_unique<NcclGroup>(r, size, shared));
  return groups;
}

NcclGroup::NcclGroup(int rank, int size, std::shared_ptr<Shared> shared)
    : rank_(rank), size_(size), shared_(std::move(shared)) {}

NcclGroup::~NcclGroup() = default;

void NcclGroup::check(int result, const char* op) const {
  if (result == ncclSuccess) return;
  throw Error(std::string("NCCL ") + op + " failed on rank " + std::to_string(rank_) + ": " +
              ncclGetErrorString(ncclResult_t(result)) +
              (result == ncclInvalidUsage || result == ncclInvalidArgument
                   ? " (a shape, dtype or order mismatch between ranks, or a bug in ShardScope)"
                   : ""));
}

bool NcclGroup::aborted() const {
  return shared_->aborted.load();
}

std::string NcclGroup::abortReason() const {
  std::shared_lock lock(shared_->mutex);
  return shared_->reason;
}

template <typename Launch>
void NcclGroup::collective(const char* op, Launch&& launch) {
  shared_->board.enter(rank_, op);
  {
    std::shared_lock lock(shared_->mutex);
    throwIfAborted();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream(shared_->devices[size_t(rank_)]).stream();
    check(launch(shared_->comms[size_t(rank_)], stream), op);
  }
  waitFor(op);
  shared_->board.leave(rank_);
}

void NcclGroup::waitForStream(const char* what) {
  if (size_ == 1) return throwIfAborted();
  shared_->board.enter(rank_, what);
  waitFor(what);
  shared_->board.leave(rank_);
}

void NcclGroup::waitFor(const char* op) {
  throwIfAborted();
  cudaStream_t stream = at::cuda::getCurrentCUDAStream(shared_->devices[size_t(rank_)]).stream();
  // While a CUDA graph is being captured nothing runs: the replay's caller waits instead.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) == cudaSuccess &&
      capture != cudaStreamCaptureStatusNone)
    return;
  const auto timeout = options().timeout;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (cudaStreamQuery(stream) == cudaErrorNotReady) {
    throwIfAborted();
    if (std::chrono::steady_clock::now() > deadline) {
      const std::string message =
          "collective " + shared_->board.collectiveOf(rank_) + " timed out after " +
          std::to_string(timeout.count()) + " ms on rank " + std::to_string(rank_) +
          " (NCCL): a rank did not reach the same collective, or a GPU is stuck; what each "
          "rank was doing:" +
          shared_->board.describe();
      abort(message);
      throw CollectiveTimeout(message);
    }
    std::this_thread::yield();
  }
  std::shared_lock lock(shared_->mutex);
  throwIfAborted();
  ncclResult_t async = ncclSuccess;
  ncclCommGetAsyncError(shared_->comms[size_t(rank_)], &async);
  check(async, op);
}

at::Tensor NcclGroup::allGather(const at::Tensor& local, int64_t dim) {
  if (size_ == 1) return local.clone();
  at::Tensor src = local.contiguous();
  std::vector<int64_t> shape{size_};
  for (int64_t s : src.sizes()) shape.push_back(s);
  at::Tensor stacked = at::empty(shape, src.options());
  collective("allGather", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllGather(src.data_ptr(), stacked.data_ptr(), src.numel(),
                         ncclType(src.scalar_type()), comm, stream);
  });
  return at::cat(stacked.unbind(0), dim);
}

void NcclGroup::allReduceSum(at::Tensor& tensor) {
  if (size_ == 1) return;
  at::Tensor buf = tensor.is_contiguous() ? tensor : tensor.contiguous();
  collective("allReduceSum", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclAllReduce(buf.data_ptr(), buf.data_ptr(), buf.numel(), ncclType(buf.scalar_type()),
                         ncclSum, comm, stream);
  });
  if (!buf.is_same(tensor)) tensor.copy_(buf);
}

void NcclGroup::broadcast(at::Tensor& tensor, int root) {
  if (size_ == 1) return;
  at::Tensor buf = tensor.is_contiguous() ? tensor : tensor.contiguous();
  collective("broadcast", [&](ncclComm_t comm, cudaStream_t stream) {
    return ncclBroadcast(buf.data_ptr(), buf.data_ptr(), buf.numel(), ncclType(buf.scalar_type()),
                         root, comm, stream);
  });
  if (!buf.is_same(tensor)) tensor.copy_(buf);
}

void NcclGroup::barrier() {
  at::Tensor one =
      at::ones({1}, at::TensorOptions().device(at::kCUDA, shared_->devices[size_t(rank_)]));
  allReduceSum(one);
}

void NcclGroup::abort(const std::string& reason) {
  std::unique_lock lock(shared_->mutex);
  if (shared_->aborted) return;
  shared_->reason = reason;
  shared_->aborted = true;
  // Every communicator, so that NCCL kernels waiting on any GPU quit. The last abort returns only
  // once the graphs recorded with them are destroyed (NCCL's rule): off the caller's thread.
  shared_->aborter = std::thread([s = shared_.get()] {
    for (size_t r = 0; r < s->comms.size(); ++r) {
      cudaSetDevice(s->devices[r]);
      ncclCommAbort(s->comms[r]);
    }
  });
}

void NcclGroup::reset() {
  if (aborted()) {
    throw Error("an aborted NCCL group cannot be reused; the engine builds a new one");
  }
  shared_->board.clear();
}

}  // namespace shardscope
