// Numbers the views draw, computed from saved values on the host (plain C++, no LibTorch):
// softmax and top-k of logits, per-head norms, attention patterns from q and k.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "core/host_tensor.h"

namespace shardscope::ui {

// A row-major float matrix.
struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> data;
  double at(int64_t r, int64_t c) const { return data[size_t(r * cols + c)]; }
};

// A tensor as [rows, last dim] (0-d and 1-d tensors are one row).
Matrix asMatrix(const HostTensor& t);
// [T, heads*headDim] -> [T, heads] of L2 norms.
Matrix perHeadNorms(const Matrix& m, int64_t heads);
// L2 norm of each row.
std::vector<double> rowNorms(const Matrix& m);
// Softmax of one row of logits.
std::vector<double> softmax(const std::vector<double>& logits);
// The k largest (index, value) pairs, largest first.
std::vector<std::pair<int64_t, double>> topK(const std::vector<double>& values, int64_t k);
// after - before, element by element (the shapes must match: empty otherwise).
Matrix difference(const Matrix& before, const Matrix& after);
// softmax(q k^T / sqrt(d)) with a causal mask: [T, T].
Matrix attentionPattern(const Matrix& q, const Matrix& k);

}  // namespace shardscope::ui
