#include "sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace shardscope {
namespace {

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, int64_t requestIndex)
    : params_(params),
      state_(params.seed * 0x100000001b3ull + uint64_t(requestIndex) * 0x9e3779b97f4a7c15ull) {}

double Sampler::nextUniform() {
  return double(splitmix64(state_) >> 11) * 0x1.0p-53;
}

int64_t Sampler::sample(const at::Tensor& logits) {
  if (params_.temperature <= 0.0) return logits.argmax().item<int64_t>();
  at::Tensor host = logits.to(at::kCPU, at::kDouble).contiguous();
  const double* l = host.data_ptr<double>();
  const int64_t V = host.numel();
  std::vector<int64_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  int64_t keep = V;
  if (params_.topK > 0 && params_.topK < V) keep = params_.topK;
  // Highest logits first; equal logits keep id order so the result never depends on the sort.
  const auto higher = [&](int64_t a, int64_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), higher);
  order.resize(keep);
  const double maxLogit = l[order[0]];
  std::vector<double> p(keep);
  double total = 0;
  for (int64_t i = 0; i < keep; ++i)
    total += p[i] = std::exp((l[order[i]] - maxLogit) / params_.temperature);
  if (params_.topP < 1.0) {
    double cum = 0;
    int64_t cut = keep;
    for (int64_t i = 0; i < keep; ++i) {
      cum += p[i] / total;
      if (cum >= params_.topP) {
        cut = i + 1;
        break;
      }
    }
    p.resize(cut);
    total = std::accumulate(p.begin(), p.end(), 0.0);
  }
  const double u = nextUniform() * total;
  double cum = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    cum += p[i];
    if (u < cum) return order[i];
  }
  return order[p.size() - 1];
}

}  // namespace shardscope
