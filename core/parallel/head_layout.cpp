#include "head_layout.h"

namespace shardscope {

HeadLayout::HeadLayout(int64_t numHeads, int64_t numKvHeads, int64_t headDim, int tp)
    : numHeads_(numHeads), numKv_(numKvHeads), headDim_(headDim), tp_(tp) {}

HeadColumns HeadLayout::qkvColumns(HeadPart part, int64_t head) const {
  const int64_t d = headDim_, qh = qHeadsPerRank(), kvh = kvHeadsPerRank();
  if (part == HeadPart::Query) return {(head / qh) * qkvColumnsPerRank() + (head % qh) * d, d};
  const int replicas = kvReplicas();
  const int64_t rank = replicas > 1 ? head * replicas : head / kvh;  // first rank holding it
  const int64_t within = replicas > 1 ? 0 : (head % kvh) * d;
  const int64_t offset = qh * d + (part == HeadPart::Value ? kvh * d : 0) + within;
  return {rank * qkvColumnsPerRank() + offset, d};
}

HeadColumns HeadLayout::rotaryKeyColumnsFor(int64_t queryHead) const {
  // Gathered k holds max(n_kv, tp) slots of head_dim: every rank's KV heads in rank order.
  const int64_t slots = numKv_ > tp_ ? numKv_ : tp_;
  const int64_t slot = queryHead / (numHeads_ / slots);
  return {slot * headDim_, headDim_};
}

}  // namespace shardscope
