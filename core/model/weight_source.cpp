#include "weight_source.h"

#include <ATen/Parallel.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "../error.h"
#include "safetensors_file.h"

namespace shardscope {

std::string shapeToString(const std::vector<int64_t>& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

namespace {

void checkSlice(const std::string& name, const std::vector<int64_t>& shape, const SliceSpec& s) {
  if (s.dim < 0) return;
  if (s.dim >= int64_t(shape.size()) || s.start < 0 || s.length < 0 ||
      s.start + s.length > shape[s.dim]) {
    throw CheckpointError("tensor '" + name + "' of shape " + shapeToString(shape) +
                          " has no slice [" + std::to_string(s.start) + ", " +
                          std::to_string(s.start + s.length) + ") along dimension " +
                          std::to_string(s.dim));
  }
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

uint64_t hashName(const std::string& s, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return splitmix64(h);
}

// Uniform in [-1, 1) from the element's index in the full tensor.
inline float uniformAt(uint64_t base, int64_t index) {
  return float(int64_t(splitmix64(base + uint64_t(index)) >> 40) - (int64_t(1) << 23)) /
         float(1 << 23);
}

bool endsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

SafetensorsSource::SafetensorsSource(const std::filesystem::path& dir) : dir_(dir) {
  const auto index = dir / "model.safetensors.index.json";
  std::vector<std::filesystem::path> paths;
  if (std::filesystem::exists(index)) {
    std::ifstream in(index);
    nlohmann::json j;
    try {
      in >> j;
    } catch (const nlohmann::json::exception& e) {
      throw CheckpointError(index.string() + ": not valid JSON (" + e.what() + ")");
    }
    if (!j.contains("weight_map") || !j["weight_map"].is_object()) {
      throw CheckpointError(index.string() + ": has no 'weight_map' object");
    }
    std::set<std::string> names;
    for (const auto& [tensor, file] : j["weight_map"].items())
      names.insert(file.get<std::string>());
    for (const auto& f : names) paths.push_back(dir / f);
  } else if (std::filesystem::exists(dir / "model.safetensors")) {
    paths.push_back(dir / "model.safetensors");
  } else {
    throw CheckpointError(
        dir.string() +
        ": no model.safetensors or model.safetensors.index.json (only safetensors "
        "checkpoints are supported)");
  }
  for (const auto& p : paths) {
    if (!std::filesystem::exists(p)) {
      throw CheckpointError(index.string() + " names " + p.filename().string() +
                            ", which is missing");
    }
    files_.push_back(std::make_unique<SafetensorsFile>(p));
    for (const auto& [name, e] : files_.back()->entries()) {
      if (!byName_.emplace(name, files_.back().get()).second) {
        throw CheckpointError(p.string() + ": tensor '" + name +
                              "' also appears in another shard file");
      }
    }
  }
}

SafetensorsSource::~SafetensorsSource() = default;

at::Tensor SafetensorsSource::load(const std::string& name, const std::vector<int64_t>& fullShape,
                                   const SliceSpec& slice, at::ScalarType dtype) {
  auto it = byName_.find(name);
  if (it == byName_.end()) {
    throw CheckpointError(dir_.string() + ": missing tensor '" + name + "' of shape " +
                          shapeToString(fullShape) + " that the model needs");
  }
  const SafetensorsFile& file = *it->second;
  const SafetensorsEntry& e = file.entry(name);
  if (e.shape != fullShape) {
    throw CheckpointError(file.path().string() + ", tensor '" + name + "': shape " +
                          shapeToString(e.shape) + " but config.json implies " +
                          shapeToString(fullShape));
  }
  checkSlice(name, fullShape, slice);
  const at::Tensor view = file.view(e);
  at::Tensor out;
  if (view.dim() == 0) {
    out = view.to(dtype, false, /*copy=*/true);
  } else {
    // Copy in blocks of whole rows and drop each block's mapped pages right after, so the
    // process never holds more than one block of the file beside the shard it keeps.
    std::vector<int64_t> shape = fullShape;
    if (slice.dim >= 0) shape[slice.dim] = slice.length;
    out = at::empty(shape, at::TensorOptions().dtype(dtype));
    const int64_t firstRow = slice.dim == 0 ? slice.start : 0;
    const size_t rowBytes = fullShape[0] > 0 ? (e.end - e.begin) / size_t(fullShape[0]) : 0;
    const int64_t blockRows =
        std::max<int64_t>(1, int64_t((32u << 20) / std::max<size_t>(rowBytes, 1)));
    for (int64_t r = 0; r < out.size(0); r += blockRows) {
      const int64_t n = std::min(blockRows, out.size(0) - r);
      at::Tensor src = view.narrow(0, firstRow + r, n);
      if (slice.dim > 0) src = src.narrow(slice.dim, slice.start, slice.length);
      out.narrow(0, r, n).copy_(src);
      file.release(e.begin + size_t(firstRow + r) * rowBytes,
                   e.begin + size_t(firstRow + r + n) * rowBytes);
    }
  }
  std::lock_guard lock(mutex_);
  used_.insert(name);
  return out;
}

void SafetensorsSource::ignore(const std::string& name) {
  std::lock_guard lock(mutex_);
  used_.insert(name);
}

void SafetensorsSource::checkAllUsed() const {
  std::lock_guard lock(mutex_);
  for (const auto& [name, file] : byName_) {
    if (used_.count(name)) continue;
    if (endsWith(name, "rotary_emb.inv_freq")) continue;  // a buffer some exporters include
    throw CheckpointError(
        file->path().string() + ": unexpected tensor '" + name +
        "' that this model does not use (does config.json match the checkpoint?)");
  }
}

at::Tensor RandomSource::load(const std::string& name, const std::vector<int64_t>& fullShape,
                              const SliceSpec& slice, at::ScalarType dtype) {
  checkSlice(name, fullShape, slice);
  std::vector<int64_t> shape = fullShape;
  int64_t outer = 1, inner = 1, dimSize = 1, start = 0;
  const int64_t dim = slice.dim;
  if (dim >= 0) {
    for (int64_t i = 0; i < dim; ++i) outer *= fullShape[i];
    for (size_t i = dim + 1; i < fullShape.size(); ++i) inner *= fullShape[i];
    dimSize = fullShape[dim];
    start = slice.start;
    shape[dim] = slice.length;
  } else {
    for (int64_t s : fullShape) inner *= s;
  }
  const int64_t length = dim >= 0 ? slice.length : 1;

  // Norm weights near 1, biases small, matrices scaled by fan-in so activations stay O(1).
  float scale = 1.0f, offset = 0.0f;
  if (endsWith(name, "norm.weight")) {
    scale = 0.1f;
    offset = 1.0f;
  } else if (endsWith(name, ".bias")) {
    scale = 0.1f;
  } else if (fullShape.size() == 2 && name.find("embed_tokens") == std::string::npos) {
    scale = std::sqrt(3.0f / float(fullShape[1]));
  }
  at::Tensor out = at::empty(shape, at::kFloat);
  float* dst = out.data_ptr<float>();
  const uint64_t base = hashName(name, seed_);
  const int64_t rows = outer * length;
  at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / length, k = r % length;
      const int64_t srcRow = (o * dimSize + start + k) * inner;
      float* d = dst + r * inner;
      for (int64_t i = 0; i < inner; ++i) d[i] = offset + scale * uniformAt(base, srcRow + i);
    }
  });
  return dtype == at::kFloat ? out : out.to(dtype);
}

}  // namespace shardscope
