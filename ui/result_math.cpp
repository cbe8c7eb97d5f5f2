#include "result_math.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace shardscope::ui {

Matrix asMatrix(const HostTensor& t) {
  Matrix m;
  const int64_t n = t.numel();
  m.cols = t.shape.empty() ? 1 : t.shape.back();
  m.rows = m.cols > 0 ? n / m.cols : 0;
  m.data.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) m.data[size_t(i)] = t.element(i);
  return m;
}

Matrix perHeadNorms(const Matrix& m, int64_t heads) {
  Matrix out;
  out.rows = m.rows;
  out.cols = heads;
  out.data.assign(size_t(m.rows * heads), 0.0);
  const int64_t d = heads > 0 ? m.cols / heads : 0;
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      double s = 0;
      for (int64_t i = 0; i < d; ++i) s += m.at(r, h * d + i) * m.at(r, h * d + i);
      out.data[size_t(r * heads + h)] = std::sqrt(s);
    }
  }
  return out;
}

std::vector<double> rowNorms(const Matrix& m) {
  std::vector<double> out(size_t(m.rows), 0.0);
  for (int64_t r = 0; r < m.rows; ++r) {
    double s = 0;
    for (int64_t c = 0; c < m.cols; ++c) s += m.at(r, c) * m.at(r, c);
    out[size_t(r)] = std::sqrt(s);
  }
  return out;
}

std::vector<double> softmax(const std::vector<double>& logits) {
  if (logits.empty()) return {};
  const double top = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  double sum = 0;
  for (size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp(logits[i] - top);
  for (double& x : p) x /= sum;
  return p;
}

std::vector<std::pair<int64_t, double>> topK(const std::vector<double>& values, int64_t k) {
  std::vector<std::pair<int64_t, double>> all;
  all.reserve(values.size());
  for (size_t i = 0; i < values.size(); ++i) all.emplace_back(int64_t(i), values[i]);
  const auto n = std::min<size_t>(size_t(std::max<int64_t>(k, 0)), all.size());
  std::partial_sort(all.begin(), all.begin() + std::ptrdiff_t(n), all.end(),
                    [](const auto& a, const auto& b) { return a.second > b.second; });
  all.resize(n);
  return all;
}

Matrix attentionPattern(const Matrix& q, const Matrix& k) {
  Matrix out;
  out.rows = q.rows;
  out.cols = k.rows;
  out.data.assign(size_t(out.rows * out.cols), 0.0);
  const double scale = 1.0 / std::sqrt(double(std::max<int64_t>(q.cols, 1)));
  for (int64_t i = 0; i < q.rows; ++i) {
    std::vector<double> row(size_t(i + 1));
    for (int64_t j = 0; j <= i && j < k.rows; ++j) {
      double s = 0;
      for (int64_t c = 0; c < q.cols; ++c) s += q.at(i, c) * k.at(j, c);
      row[size_t(j)] = s * scale;
    }
    const auto p = softmax(row);
    for (size_t j = 0; j < p.size() && int64_t(j) < out.cols; ++j)
      out.data[size_t(i * out.cols) + j] = p[j];
  }
  return out;
}

Matrix difference(const Matrix& before, const Matrix& after) {
  if (before.rows != after.rows || before.cols != after.cols) return {};
  Matrix d{before.rows, before.cols, std::vector<double>(before.data.size())};
  for (size_t i = 0; i < d.data.size(); ++i) d.data[i] = after.data[i] - before.data[i];
  return d;
}

}  // namespace shardscope::ui
