// StageChannel: how the ranks of a pipeline-parallel grid (T tensor-parallel ranks by P stages)
// share what one stage holds with every rank of every stage, over the world group. A message is
// a tag, a tuple flag and up to kMaxItems tensors (None items allowed); the tensor-parallel rank 0
// of the sending stage broadcasts a fixed-size header (tag, flag, dtypes and shapes), then each
// tensor. Receivers need no shape ahead of time, so the same channel carries a port value, the
// hidden states handed to the next stage, a module call's result and a parameter.
//
// Contract: every rank of the world calls share() for every message, in the same order (like any
// collective). The ranks of the sending stage pass the message, identical on each of them, and get
// it back unchanged (their own tensors, not copies: writes to them still reach the model); every
// other rank gets freshly received tensors on its device. Works for CPU and CUDA tensors, through
// whatever ProcessGroup the world is (local threads or NCCL).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

namespace shardscope {

class ProcessGroup;

struct StageMessage {
  int64_t tag = 0;
  bool tuple = false;
  std::vector<at::Tensor> items;  // undefined items are None
};

class StageChannel {
 public:
  static constexpr size_t kMaxItems = 6;
  static constexpr int64_t kMaxDims = 8;

  // `world`: every rank of the grid, numbered stage * tp + tensor-parallel rank.
  StageChannel(ProcessGroup& world, int tp, at::Device device);

  int stage() const;
  int tpRank() const;
  int stages() const;
  // Every rank of the grid (for the sampled ids, which every stage needs).
  ProcessGroup& world() { return world_; }

  // Sends `message` from stage `from` (its tensor-parallel rank 0 broadcasts) to every rank.
  StageMessage share(int from, StageMessage message);
  // Every rank with tensor-parallel rank t gets `piece` of the rank (from, t): per-rank shards
  // (a parameter of another stage's module). T broadcasts.
  at::Tensor sharePerTpRank(int from, const at::Tensor& piece);

 private:
  ProcessGroup& world_;
  int tp_;
  at::Device device_;
};

// Text as a tensor of bytes (to share it like any value), and back.
at::Tensor textTensor(const std::string& text);
std::string textOf(const at::Tensor& bytes);

// A message that carries an error instead of a value: one stage failed where every stage waits
// for its answer (a module call on another stage's module); the others raise the same message.
StageMessage errorMessage(const std::string& what);
// The error text of a message made by errorMessage, or empty when it holds a value.
std::string errorOf(const StageMessage& m);

}  // namespace shardscope
