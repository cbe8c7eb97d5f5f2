#include "stage_channel.h"

#include <cstring>

#include "../error.h"
#include "collective_board.h"
#include "process_group.h"

namespace shardscope {
namespace {

constexpr int64_t kErrorTag = -1000;
// [tag, tuple, count, then per item: defined, dtype, ndim, dims[kMaxDims]]
constexpr int64_t kItemFields = 3 + StageChannel::kMaxDims;
constexpr int64_t kHeaderSize = 3 + int64_t(StageChannel::kMaxItems) * kItemFields;

at::Tensor encodeHeader(const StageMessage& m) {
  SS_ASSERT(m.items.size() <= StageChannel::kMaxItems, "a stage message holds too many tensors");
  at::Tensor h = at::zeros({kHeaderSize}, at::kLong);
  int64_t* d = h.data_ptr<int64_t>();
  d[0] = m.tag;
  d[1] = m.tuple ? 1 : 0;
  d[2] = int64_t(m.items.size());
  for (size_t i = 0; i < m.items.size(); ++i) {
    int64_t* f = d + 3 + int64_t(i) * kItemFields;
    const at::Tensor& t = m.items[i];
    if (!t.defined()) continue;
    SS_ASSERT(t.dim() <= StageChannel::kMaxDims, "a stage message tensor has too many dims");
    f[0] = 1;
    f[1] = int64_t(t.scalar_type());
    f[2] = t.dim();
    for (int64_t k = 0; k < t.dim(); ++k) f[3 + k] = t.size(k);
  }
  return h;
}

}  // namespace

StageChannel::StageChannel(ProcessGroup& world, int tp, at::Device device)
    : world_(world), tp_(tp), device_(device) {}

int StageChannel::stage() const {
  return world_.rank() / tp_;
}

int StageChannel::tpRank() const {
  return world_.rank() % tp_;
}

int StageChannel::stages() const {
  return world_.size() / tp_;
}

StageMessage StageChannel::share(int from, StageMessage message) {
  const bool sending = stage() == from;
  const int root = from * tp_;
  at::Tensor header =
      (sending ? encodeHeader(message) : at::zeros({kHeaderSize}, at::kLong)).to(device_);
  world_.broadcast(header, root);
  header = header.to(at::kCPU);
  const int64_t* d = header.data_ptr<int64_t>();
  StageMessage received;
  received.tag = d[0];
  received.tuple = d[1] != 0;
  for (int64_t i = 0; i < d[2]; ++i) {
    const int64_t* f = d + 3 + i * kItemFields;
    if (f[0] == 0) {
      received.items.emplace_back();
      continue;
    }
    at::Tensor t;
    if (world_.rank() == root) {
      t = message.items[size_t(i)].to(device_).contiguous();
    } else {
      const std::vector<int64_t> shape(f + 3, f + 3 + f[2]);
      t = at::empty(shape, at::TensorOptions().dtype(at::ScalarType(f[1])).device(device_));
    }
    world_.broadcast(t, root);
    received.items.push_back(std::move(t));
  }
  return sending ? std::move(message) : std::move(received);
}

at::Tensor StageChannel::sharePerTpRank(int from, const at::Tensor& piece) {
  at::Tensor mine;
  for (int t = 0; t < tp_; ++t) {
    // Broadcast from rank (from, t): the ranks of `from` take turns as the sender.
    const int root = from * tp_ + t;
    const bool sending = world_.rank() == root;
    StageMessage m;
    if (sending) m.items = {piece};
    at::Tensor header =
        (sending ? encodeHeader(m) : at::zeros({kHeaderSize}, at::kLong)).to(device_);
    world_.broadcast(header, root);
    header = header.to(at::kCPU);
    const int64_t* f = header.data_ptr<int64_t>() + 3;
    SS_ASSERT(f[0] == 1, "a per-rank share without a tensor");
    at::Tensor buffer =
        sending ? piece.to(device_).contiguous()
                : at::empty(std::vector<int64_t>(f + 3, f + 3 + f[2]),
                            at::TensorOptions().dtype(at::ScalarType(f[1])).device(device_));
    world_.broadcast(buffer, root);
    if (t == tpRank()) mine = stage() == from ? piece : buffer;
  }
  return mine;
}

at::Tensor textTensor(const std::string& text) {
  at::Tensor bytes = at::empty({int64_t(text.size())}, at::kByte);
  if (!text.empty()) std::memcpy(bytes.data_ptr(), text.data(), text.size());
  return bytes;
}

std::string textOf(const at::Tensor& bytes) {
  const at::Tensor host = bytes.to(at::kCPU).contiguous();
  if (host.numel() == 0) return {};
  return std::string(static_cast<const char*>(host.data_ptr()), size_t(host.numel()));
}

StageMessage errorMessage(const std::string& what) {
  StageMessage m;
  m.tag = kErrorTag;
  m.items = {textTensor(what.empty() ? std::string("unknown error") : what)};
  return m;
}

std::string errorOf(const StageMessage& m) {
  if (m.tag != kErrorTag || m.items.empty()) return {};
  return textOf(m.items[0]);
}

}  // namespace shardscope
