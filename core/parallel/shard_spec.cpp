#include "shard_spec.h"

#include <algorithm>
#include <numeric>

#include "../error.h"
#include "process_group.h"

namespace shardscope {
namespace {

int64_t normalisedDim(int64_t dim, int64_t rank) {
  return dim < 0 ? rank + dim : dim;
}

}  // namespace

const char* shardKindName(ShardKind k) {
  switch (k) {
    case ShardKind::Whole:
      return "whole";
    case ShardKind::Column:
      return "column";
    case ShardKind::FusedColumn:
      return "fused";
    case ShardKind::RowInput:
      return "row";
    case ShardKind::Head:
      return "head";
    case ShardKind::PartialSum:
      return "partial";
    case ShardKind::Vocab:
      return "vocab";
    case ShardKind::DcpGroup:
      return "dcp-group";
  }
  return "?";
}

ShardSpec ShardSpec::split(ShardKind kind, int64_t dim, int replicas) {
  SS_ASSERT(kind != ShardKind::Whole && kind != ShardKind::PartialSum,
            "ShardSpec::split needs a split kind");
  SS_ASSERT(replicas >= 1, "a shard is held by at least one rank");
  return {kind, dim, replicas};
}

ShardSpec ShardSpec::fused(std::vector<int64_t> partSizes, int64_t dim) {
  ShardSpec s(ShardKind::FusedColumn, dim);
  s.parts = std::move(partSizes);
  return s;
}

ShardSpec ShardSpec::padded(ShardKind kind, int64_t dim, int64_t wholeSize) {
  ShardSpec s = split(kind, dim);
  s.wholeSize = wholeSize;
  return s;
}

bool ShardSpec::isSplit() const {
  return kind != ShardKind::Whole && kind != ShardKind::PartialSum;
}

at::Tensor gather(const at::Tensor& local, const ShardSpec& spec, ProcessGroup& group) {
  if (!local.defined() || spec.kind == ShardKind::Whole) return local;
  if (spec.kind == ShardKind::PartialSum) {
    at::Tensor t = local.clone();
    group.allReduceSum(t);
    return t;
  }
  const int64_t dim = normalisedDim(spec.dim, local.dim());
  if (!spec.parts.empty()) {
    const int64_t sum = std::accumulate(spec.parts.begin(), spec.parts.end(), int64_t(0));
    SS_ASSERT(sum == local.size(dim), "a fused port's parts do not add up to its shard");
  }
  at::Tensor whole = local;
  if (group.size() > 1) {
    whole = group.allGather(local.contiguous(), dim);
    if (spec.replicas > 1 && spec.kind != ShardKind::FusedColumn) {
      std::vector<at::Tensor> distinct;  // one copy of each replicated shard
      auto shards = whole.chunk(group.size(), dim);
      for (int r = 0; r < group.size(); r += spec.replicas) distinct.push_back(shards[size_t(r)]);
      whole = at::cat(distinct, dim);
    }
  }
  if (spec.wholeSize >= 0 && spec.wholeSize < whole.size(dim))
    whole = whole.narrow(dim, 0, spec.wholeSize);  // trims the padding
  return whole;
}

void scatterBack(at::Tensor& local, const at::Tensor& whole, const ShardSpec& spec,
                 ProcessGroup& group) {
  if (!local.defined() || spec.kind == ShardKind::Whole) return;  // edited in place
  if (spec.kind == ShardKind::PartialSum) {
    local.copy_(whole / double(group.size()));  // the block's own reduce sums it exactly once
    return;
  }
  if (group.size() == 1) return;  // the whole is (a view of) the local tensor
  const int64_t dim = normalisedDim(spec.dim, local.dim());
  const int64_t chunk = local.size(dim);
  const bool dedup = spec.replicas > 1 && spec.kind != ShardKind::FusedColumn;
  const int64_t start = (dedup ? group.rank() / spec.replicas : group.rank()) * chunk;
  const int64_t end = spec.wholeSize >= 0 ? std::min(start + chunk, spec.wholeSize) : start + chunk;
  if (end <= start) return;  // this rank holds padding only
  local.narrow(dim, 0, end - start).copy_(whole.narrow(dim, start, end - start));
}

std::vector<int64_t> wholeShape(std::vector<int64_t> shape, const ShardSpec& spec, int tp) {
  if (shape.empty() || !spec.isSplit()) return shape;
  const size_t dim = size_t(normalisedDim(spec.dim, int64_t(shape.size())));
  const bool dedup = spec.replicas > 1 && spec.kind != ShardKind::FusedColumn;
  shape[dim] = shape[dim] * tp / (dedup ? spec.replicas : 1);
  if (spec.wholeSize >= 0) shape[dim] = std::min(shape[dim], spec.wholeSize);
  return shape;
}

}  // namespace shardscope
