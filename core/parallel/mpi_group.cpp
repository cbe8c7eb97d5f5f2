#include "mpi_group.h"

#include <climits>

#include "../error.h"
#include "mpi_runtime.h"

namespace shardscope {
namespace {

// A byte block of one element's size: any dtype (bf16 included) travels as its raw bytes.
MPI_Datatype bytesOfSize(int64_t size) {
  switch (size) {
    case 1:
      return MPI_UINT8_T;
    case 2:
      return MPI_UINT16_T;
    case 4:
      return MPI_UINT32_T;
    case 8:
      return MPI_UINT64_T;
    default:
      break;
  }
  throw Error("MpiGroup cannot exchange elements of " + std::to_string(size) + " bytes");
}

}  // namespace

std::unique_ptr<MpiGroup> MpiGroup::create(MPI_Comm parent) {
  MPI_Comm comm;
  MPI_Request request;
  MPI_Comm_idup(parent, &comm, &request);
  mpiWait(request, "communicator duplication for a new process group");
  return std::make_unique<MpiGroup>(comm);
}

MpiGroup::MpiGroup(MPI_Comm comm) : comm_(comm) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
}

MpiGroup::~MpiGroup() {
  // An aborted group's communicator may still carry an abandoned collective: it stays.
  if (!aborted_) MPI_Comm_free(&comm_);
}

MPI_Datatype MpiGroup::elementType(const at::Tensor& t, const char* op) const {
  if (!t.device().is_cpu())
    throw Error(std::string("MpiGroup::") + op + " got a tensor on " + t.device().str() +
                "; MPI exchanges CPU tensors (GPU rank processes use NCCL, bootstrapped over MPI)");
  if (t.numel() > INT_MAX)
    throw Error(std::string("MpiGroup::") + op + ": a tensor of " + std::to_string(t.numel()) +
                " elements is more than one MPI call can move");
  return bytesOfSize(int64_t(t.element_size()));
}

void MpiGroup::wait(MPI_Request& request, const char* op, std::vector<at::Tensor> buffers) {
  const auto timeout = options().timeout;
  try {
    mpiWait(
        request, op, [this] { throwIfAborted(); }, std::chrono::steady_clock::now() + timeout);
  } catch (const CollectiveAborted&) {
    keepUntilExit(std::make_shared<std::vector<at::Tensor>>(std::move(buffers)));
    throw;
  } catch (const Error&) {  // the watchdog
    keepUntilExit(std::make_shared<std::vector<at::Tensor>>(std::move(buffers)));
    const std::string message = std::string("collective ") + op + " timed out after " +
                                std::to_string(timeout.count()) + " ms on rank " +
                                std::to_string(rank_) +
                                " (MPI): a rank did not reach the same collective (every rank must "
                                "call the same collectives "
                                "in the same order), or its process is stuck or gone";
    abort(message);
    throw CollectiveTimeout(message);
  }
}

at::Tensor MpiGroup::gatherStacked(const at::Tensor& local, const char* op) {
  throwIfAborted();
  at::Tensor src = local.contiguous();
  const MPI_Datatype type = elementType(src, op);
  std::vector<int64_t> shape{size_};
  for (int64_t s : src.sizes()) shape.push_back(s);
  at::Tensor stacked = at::empty(shape, src.options());
  MPI_Request request;
  MPI_Iallgather(src.data_ptr(), int(src.numel()), type, stacked.data_ptr(), int(src.numel()), type,
                 comm_, &request);
  wait(request, op, {src, stacked});
  return stacked;
}

at::Tensor MpiGroup::allGather(const at::Tensor& local, int64_t dim) {
  if (size_ == 1) return local.clone();
  return at::cat(gatherStacked(local, "allGather").unbind(0), dim);
}

void MpiGroup::allReduceSum(at::Tensor& tensor) {
  if (size_ == 1) return;
  const auto parts = gatherStacked(tensor, "allReduceSum").unbind(0);
  at::Tensor sum = parts[0].clone();
  for (int r = 1; r < size_; ++r) sum.add_(parts[size_t(r)]);  // rank order, as LocalGroup
  tensor.copy_(sum);
}

void MpiGroup::broadcast(at::Tensor& tensor, int root) {
  if (size_ == 1) return;
  throwIfAborted();
  at::Tensor buf = tensor.is_contiguous() ? tensor : tensor.contiguous();
  const MPI_Datatype type = elementType(buf, "broadcast");
  MPI_Request request;
  MPI_Ibcast(buf.data_ptr(), int(buf.numel()), type, root, comm_, &request);
  wait(request, "broadcast", {buf});
  if (!buf.is_same(tensor)) tensor.copy_(buf);
}

void MpiGroup::barrier() {
  if (size_ == 1) return;
  throwIfAborted();
  MPI_Request request;
  MPI_Ibarrier(comm_, &request);
  wait(request, "barrier", {});
}

void MpiGroup::abort(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (aborted_) return;
  reason_ = reason;
  aborted_ = true;
}

std::string MpiGroup::abortReason() const {
  std::lock_guard lock(mutex_);
  return reason_;
}

void MpiGroup::reset() {
  if (aborted()) throw Error("an aborted MPI group cannot be reused; the engine builds a new one");
}

}  // namespace shardscope
