#include "nccl_group.h"

#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <thread>

#include "../error.h"
#include "collective_board.h"
#if SHARDSCOPE_WITH_CUDA_KERNELS
#include "peer_all_reduce.h"
#endif

namespace shardscope {

namespace {

// Makes `device` current for what follows (`purpose`), or says why not.
void selectDevice(int device, const std::string& purpose) {
  const cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) return;
  throw Error("selecting GPU " + std::to_string(device) + " to " + purpose +
              " failed: " + cudaGetErrorString(e) +
              "; check CUDA_VISIBLE_DEVICES and that no other process holds the GPU in "
              "exclusive mode");
}

// A new communicator's id (rank 0 makes it; the others are given it).
ncclUniqueId makeUniqueId() {
  ncclUniqueId id;
  const ncclResult_t r = ncclGetUniqueId(&id);
  if (r == ncclSuccess) return id;
  throw Error(std::string("NCCL could not make a communicator id (ncclGetUniqueId): ") +
              ncclGetErrorString(r) +
              "; NCCL_DEBUG=WARN prints its reason (often no usable network interface for its "
              "bootstrap: set NCCL_SOCKET_IFNAME, for example to lo on one host)");
}

}  // namespace

struct NcclGroup::Shared {
  explicit Shared(int size) : board(size) {}
  ~Shared() {
    if (aborter.joinable()) {
      aborter.join();  // returns once every graph recorded with the communicators is destroyed
      return;
    }
    releaseWindows();
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

  AllReduceAlgorithm algorithm = AllReduceAlgorithm::Nccl;
#if SHARDSCOPE_WITH_CUDA_KERNELS
  std::unique_ptr<PeerAllReduce> peer;
#endif
  // NcclSymmetric: per rank a buffer registered as a symmetric window; small all-reduces are
  // copied in, reduced there and copied out.
  size_t windowBytes = 0;
  std::vector<void*> windowBuffers;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  std::vector<ncclWindow_t> windows;
#endif
  void registerWindows(size_t bytes);
  void releaseWindows();
};

void NcclGroup::Shared::registerWindows(size_t bytes) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  windowBytes = bytes;
  windowBuffers.assign(comms.size(), nullptr);
  windows.assign(comms.size(), nullptr);
  for (size_t r = 0; r < comms.size(); ++r) {
    selectDevice(devices[r], "allocate its symmetric all-reduce window");
    if (ncclMemAlloc(&windowBuffers[r], bytes) != ncclSuccess)
      throw Error("ncclMemAlloc of the symmetric all-reduce window failed on GPU " +
                  std::to_string(devices[r]) + "; use SHARDSCOPE_ALL_REDUCE=nccl or peer");
  }
  ncclGroupStart();
  for (size_t r = 0; r < comms.size(); ++r) {
    cudaSetDevice(devices[r]);  // selected above; no throw between the group's start and end
    ncclCommWindowRegister(comms[r], windowBuffers[r], bytes, &windows[r], NCCL_WIN_COLL_SYMMETRIC);
  }
  const ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess)
    throw Error(std::string("registering NCCL symmetric windows failed: ") +
                ncclGetErrorString(res) + "; use SHARDSCOPE_ALL_REDUCE=nccl or peer");
#else
  (void)bytes;
  throw Error("SHARDSCOPE_ALL_REDUCE=nccl-symmetric needs NCCL 2.27 or later; this build has " +
              std::to_string(NCCL_VERSION_CODE) + "; use nccl or peer");
#endif
}

void NcclGroup::Shared::releaseWindows() {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 27, 0)
  if (windows.empty()) return;
  ncclGroupStart();
  for (size_t r = 0; r < comms.size(); ++r) {
    if (!windows[r]) continue;
    cudaSetDevice(devices[r]);
    ncclCommWindowDeregister(comms[r], windows[r]);
  }
  ncclGroupEnd();
  for (size_t r = 0; r < comms.size(); ++r) {
    cudaSetDevice(devices[r]);
    if (windowBuffers[r]) ncclMemFree(windowBuffers[r]);
  }
  windows.clear();
#endif
}

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

// Sets up the small-tensor all-reduce `wanted` asks for. Peer (asked for) without peer access
// throws; Auto falls back to NCCL and says why once on stderr.
void chooseAllReduce(NcclGroup::Shared& shared, AllReduceAlgorithm wanted) {
  const int size = int(shared.comms.size());
  if (size == 1 || wanted == AllReduceAlgorithm::Nccl) {
    shared.algorithm = AllReduceAlgorithm::Nccl;
    return;
  }
  if (wanted == AllReduceAlgorithm::NcclSymmetric) {
    shared.registerWindows(NcclGroup::kSmallAllReduceBytes);
    shared.algorithm = AllReduceAlgorithm::NcclSymmetric;
    return;
  }
#if SHARDSCOPE_WITH_CUDA_KERNELS
  std::string why;
  shared.peer = PeerAllReduce::create(shared.devices, NcclGroup::kSmallAllReduceBytes, why);
  if (shared.peer) {
    shared.algorithm = AllReduceAlgorithm::Peer;
    return;
  }
#else
  const std::string why = "this build has no fused CUDA kernels (nvcc was not found)";
#endif
  if (wanted == AllReduceAlgorithm::Peer)
    throw Error("SHARDSCOPE_ALL_REDUCE=peer cannot work here: " + why + "; use auto or nccl");
  std::fprintf(stderr, "shardscope: small all-reduces use NCCL: %s\n", why.c_str());
  shared.algorithm = AllReduceAlgorithm::Nccl;
}

}  // namespace

AllReduceAlgorithm NcclGroup::allReduceAlgorithm() const {
  return shared_->algorithm;
}

std::vector<std::unique_ptr<NcclGroup>> NcclGroup::create(int size, AllReduceAlgorithm algorithm) {
  std::vector<int> devices;
  for (int r = 0; r < size; ++r) devices.push_back(r);
  return create(devices, algorithm);
}

std::vector<std::unique_ptr<NcclGroup>> NcclGroup::create(const std::vector<int>& devices,
                                                          AllReduceAlgorithm algorithm) {
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
  for (size_t r = 0; r < devices.size(); ++r)
    selectDevice(devices[r], "create rank " + std::to_string(r) + "'s NCCL communicator");
  const ncclUniqueId id = makeUniqueId();
  auto shared = std::make_shared<Shared>(size);
  shared->comms.assign(size_t(size), nullptr);
  shared->devices = devices;
  ncclGroupStart();
  for (int r = 0; r < size; ++r) {
    cudaSetDevice(
        devices[size_t(r)]);  // selected above; no throw between the group's start and end
    ncclCommInitRank(&shared->comms[size_t(r)], size, id, r);
  }
  const ncclResult_t res = ncclGroupEnd();
  if (res != ncclSuccess) {
    throw Error(std::string("creating NCCL communicators failed: ") + ncclGetErrorString(res));
  }
  chooseAllReduce(*shared, algorithm);
  std::vector<std::unique_ptr<NcclGroup>> groups;
  for (int r = 0; r < size; ++r) groups.push_back(std::make_unique<NcclGroup>(r, size, shared));
  return groups;
}

std::string NcclGroup::newUniqueId() {
  const ncclUniqueId id = makeUniqueId();
  return std::string(id.internal, sizeof(id.internal));
}

std::unique_ptr<NcclGroup> NcclGroup::join(int rank, int size, const std::string& uniqueId,
                                           int device) {
  ncclUniqueId id;
  if (uniqueId.size() != sizeof(id.internal))
    throw Error("an NCCL unique id has " + std::to_string(sizeof(id.internal)) + " bytes, got " +
                std::to_string(uniqueId.size()));
  std::memcpy(id.internal, uniqueId.data(), sizeof(id.internal));
  auto shared = std::make_shared<Shared>(size);
  shared->comms.assign(size_t(size), nullptr);
  shared->devices.assign(size_t(size), device);
  selectDevice(device, "join the NCCL communicator as rank " + std::to_string(rank));
  const ncclResult_t res = ncclCommInitRank(&shared->comms[size_t(rank)], size, id, rank);
  if (res != ncclSuccess) {
    throw Error("joining the NCCL communicator as rank " + std::to_string(rank) + " of " +
                std::to_string(size) + " on GPU " + std::to_string(device) +
                " failed: " + ncclGetErrorString(res));
  }
  return std::make_unique<NcclGroup>(rank, size, shared);
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
  const size_t bytes = size_t(buf.numel()) * buf.element_size();
  Shared& s = *shared_;
#if SHARDSCOPE_WITH_CUDA_KERNELS
  if (s.algorithm == AllReduceAlgorithm::Peer && s.peer->accepts(buf)) {
    collective("allReduceSum", [&](ncclComm_t, cudaStream_t stream) {
      s.peer->launch(buf, rank_, stream);
      return ncclSuccess;
    });
    if (!buf.is_same(tensor)) tensor.copy_(buf);
    return;
  }
#endif
  const bool windowed = s.algorithm == AllReduceAlgorithm::NcclSymmetric && bytes <= s.windowBytes;
  collective("allReduceSum", [&](ncclComm_t comm, cudaStream_t stream) {
    void* data = buf.data_ptr();
    if (windowed) {
      data = s.windowBuffers[size_t(rank_)];
      cudaMemcpyAsync(data, buf.data_ptr(), bytes, cudaMemcpyDeviceToDevice, stream);
    }
    const ncclResult_t r =
        ncclAllReduce(data, data, buf.numel(), ncclType(buf.scalar_type()), ncclSum, comm, stream);
    if (windowed) cudaMemcpyAsync(buf.data_ptr(), data, bytes, cudaMemcpyDeviceToDevice, stream);
    return r;
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
#if SHARDSCOPE_WITH_CUDA_KERNELS
  if (shared_->peer) shared_->peer->abort();  // peer kernels waiting on a rank return now
#endif
  // Every communicator, so that NCCL kernels waiting on any GPU quit. The last abort returns only
  // once the graphs recorded with them are destroyed (NCCL's rule): off the caller's thread.
  shared_->aborter = std::thread([s = shared_.get()] {
    for (size_t r = 0; r < s->comms.size(); ++r) {
      if (!s->comms[r]) continue;  // a rank process holds only its own communicator
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
