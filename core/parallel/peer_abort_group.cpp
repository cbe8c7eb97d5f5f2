#include "peer_abort_group.h"

#include "../error.h"
#include "mpi_runtime.h"

namespace shardscope {
namespace {

constexpr int kAbortTag = 7001;

}  // namespace

PeerAbortGroup::PeerAbortGroup(std::unique_ptr<ProcessGroup> inner, MPI_Comm parent,
                               std::string where)
    : inner_(std::move(inner)), where_(std::move(where)) {
  MPI_Request request;
  MPI_Comm_idup(parent, &comm_, &request);
  mpiWait(request, "communicator duplication for abort messages");
  watcher_ = std::thread([this] { watch(); });
}

PeerAbortGroup::~PeerAbortGroup() {
  stop_ = true;
  watcher_.join();
  // After an abort, sends to a dead or departed peer may still be pending: keep the communicator.
  if (!sent_ && !inner_->aborted()) MPI_Comm_free(&comm_);
}

ProcessGroup& PeerAbortGroup::inner() {
  inner_->setOptions(options());
  return *inner_;
}

template <typename Call>
auto PeerAbortGroup::located(Call&& call) {
  try {
    return call(inner());
  } catch (const CollectiveTimeout& e) {
    // The wrapped group's watchdog knows its rank, not its process: the host is added here, for
    // MPI and NCCL alike. The peers hear it now (the same text), not only once the engine aborts.
    const std::string message = e.what() + std::string(" [") + where_ + "]";
    if (abortInner(message)) sendToPeers(message);
    throw CollectiveTimeout(message);
  }
}

at::Tensor PeerAbortGroup::allGather(const at::Tensor& local, int64_t dim) {
  return located([&](ProcessGroup& g) { return g.allGather(local, dim); });
}

void PeerAbortGroup::allReduceSum(at::Tensor& tensor) {
  located([&](ProcessGroup& g) { g.allReduceSum(tensor); });
}

void PeerAbortGroup::broadcast(at::Tensor& tensor, int root) {
  located([&](ProcessGroup& g) { g.broadcast(tensor, root); });
}

void PeerAbortGroup::barrier() {
  located([](ProcessGroup& g) { g.barrier(); });
}

void PeerAbortGroup::waitForStream(const char* what) {
  located([what](ProcessGroup& g) { g.waitForStream(what); });
}

std::string PeerAbortGroup::abortReason() const {
  std::lock_guard lock(mutex_);
  return reason_.empty() ? "a collective of this process timed out" : reason_;
}

bool PeerAbortGroup::abortInner(const std::string& reason) {
  {
    std::lock_guard lock(mutex_);
    if (!reason_.empty()) return false;
    reason_ = reason;
  }
  inner_->abort(reason);
  return true;
}

void PeerAbortGroup::abort(const std::string& reason) {
  const std::string message = reason + " [" + where_ + "]";
  if (abortInner(message)) sendToPeers(message);
}

void PeerAbortGroup::sendToPeers(const std::string& reason) {
  if (sent_.exchange(true)) return;
  // The text must outlive the sends, which may never complete when a peer is gone.
  auto text = std::make_shared<std::string>(reason);
  keepUntilExit(text);
  for (int peer = 0; peer < size(); ++peer) {
    if (peer == rank()) continue;
    MPI_Request request;
    MPI_Isend(text->data(), int(text->size()), MPI_CHAR, peer, kAbortTag, comm_, &request);
    MPI_Request_free(&request);
  }
}

void PeerAbortGroup::watch() {
  while (!stop_) {
    int found = 0;
    MPI_Status status;
    MPI_Iprobe(MPI_ANY_SOURCE, kAbortTag, comm_, &found, &status);
    if (!found) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      continue;
    }
    int count = 0;
    MPI_Get_count(&status, MPI_CHAR, &count);
    std::string reason(size_t(count), '\0');
    MPI_Recv(reason.data(), count, MPI_CHAR, status.MPI_SOURCE, kAbortTag, comm_,
             MPI_STATUS_IGNORE);
    abortInner(reason);  // not sent on: the peer that failed told every process itself
  }
}

}  // namespace shardscope
