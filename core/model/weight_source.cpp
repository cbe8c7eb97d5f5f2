#include "weight_source.h"

#include <ATen/Parallel.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <tuple>

#include "../error.h"
#include "layers/tp_rank.h"
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

// splitmix64's constants, shared by the host loop and the tensor ops (uniformAtIndices), whose
// values must agree bit for bit.
constexpr uint64_t kSplitmixAdd = 0x9e3779b97f4a7c15ull, kSplitmixMul1 = 0xbf58476d1ce4e5b9ull,
                   kSplitmixMul2 = 0x94d049bb133111ebull;

uint64_t splitmix64(uint64_t x) {
  x += kSplitmixAdd;
  x = (x ^ (x >> 30)) * kSplitmixMul1;
  x = (x ^ (x >> 27)) * kSplitmixMul2;
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

namespace {

// Where a slice's elements come from in the full tensor: element (o, k, i) of the slice, with o
// over the dimensions before `dim`, k along it and i over those after, is element
// (o * dimSize + start + k) * inner + i of the whole.
struct SliceIndex {
  std::vector<int64_t> shape;
  int64_t outer = 1, inner = 1, dimSize = 1, start = 0, length = 1;

  SliceIndex(const std::vector<int64_t>& fullShape, const SliceSpec& slice) : shape(fullShape) {
    if (slice.dim < 0) {
      for (int64_t s : fullShape) inner *= s;
      return;
    }
    for (int64_t i = 0; i < slice.dim; ++i) outer *= fullShape[i];
    for (size_t i = slice.dim + 1; i < fullShape.size(); ++i) inner *= fullShape[i];
    dimSize = fullShape[slice.dim];
    start = slice.start;
    length = slice.length;
    shape[slice.dim] = slice.length;
  }
  int64_t rows() const { return outer * length; }
};

// Norm weights near 1, biases small, matrices scaled by fan-in so activations stay O(1).
std::pair<float, float> scaleAndOffset(const std::string& name,
                                       const std::vector<int64_t>& fullShape) {
  if (endsWith(name, "norm.weight")) return {0.1f, 1.0f};
  if (endsWith(name, ".bias")) return {0.1f, 0.0f};
  if (fullShape.size() == 2 && name.find("embed_tokens") == std::string::npos) {
    return {std::sqrt(3.0f / float(fullShape[1])), 0.0f};
  }
  return {1.0f, 0.0f};
}

// x >> s on the bits of a uint64 held in an int64 tensor (ATen shifts int64 arithmetically).
at::Tensor logicalShiftRight(const at::Tensor& x, int s) {
  return at::bitwise_and(at::bitwise_right_shift(x, s), int64_t((~0ull) >> s));
}

// The same bits as an int64 (the conversion is modular since C++20).
int64_t asSigned(uint64_t v) {
  return static_cast<int64_t>(v);
}

// uniformAt over a tensor of indices; int64 adds and multiplies wrap as uint64's do.
at::Tensor uniformAtIndices(uint64_t base, const at::Tensor& index) {
  at::Tensor x = index + asSigned(base + kSplitmixAdd);
  x = at::bitwise_xor(x, logicalShiftRight(x, 30)) * asSigned(kSplitmixMul1);
  x = at::bitwise_xor(x, logicalShiftRight(x, 27)) * asSigned(kSplitmixMul2);
  x = at::bitwise_xor(x, logicalShiftRight(x, 31));
  return (logicalShiftRight(x, 40) - (int64_t(1) << 23)).to(at::kFloat).div_(float(1 << 23));
}

}  // namespace

at::Tensor RandomSource::load(const std::string& name, const std::vector<int64_t>& fullShape,
                              const SliceSpec& slice, at::ScalarType dtype) {
  checkSlice(name, fullShape, slice);
  const SliceIndex ix(fullShape, slice);
  float scale = 0.f, offset = 0.f;  // not a structured binding: the lambda below reads them (C++17)
  std::tie(scale, offset) = scaleAndOffset(name, fullShape);
  at::Tensor out = at::empty(ix.shape, at::kFloat);
  float* dst = out.data_ptr<float>();
  const uint64_t base = hashName(name, seed_);
  at::parallel_for(0, ix.rows(), 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const int64_t o = r / ix.length, k = r % ix.length;
      const int64_t srcRow = (o * ix.dimSize + ix.start + k) * ix.inner;
      float* d = dst + r * ix.inner;
      for (int64_t i = 0; i < ix.inner; ++i) d[i] = offset + scale * uniformAt(base, srcRow + i);
    }
  });
  return dtype == at::kFloat ? out : out.to(dtype);
}

at::Tensor RandomSource::loadOn(const std::string& name, const std::vector<int64_t>& fullShape,
                                const SliceSpec& slice, at::ScalarType dtype, at::Device device) {
  if (device.is_cpu()) return load(name, fullShape, slice, dtype);
  return makeWithTensorOps(name, fullShape, slice, dtype, device);
}

at::Tensor RandomSource::makeWithTensorOps(const std::string& name,
                                           const std::vector<int64_t>& fullShape,
                                           const SliceSpec& slice, at::ScalarType dtype,
                                           at::Device device) const {
  checkSlice(name, fullShape, slice);
  const SliceIndex ix(fullShape, slice);
  const auto [scale, offset] = scaleAndOffset(name, fullShape);
  const uint64_t base = hashName(name, seed_);
  at::Tensor out = at::empty(ix.shape, at::TensorOptions().dtype(dtype).device(device));
  at::Tensor flat = out.view({-1});
  // In chunks, so the int64 temporaries of a 311M-element embedding stay a few hundred MB.
  constexpr int64_t kChunk = int64_t(1) << 24;
  const auto longs = at::TensorOptions().dtype(at::kLong).device(device);
  for (int64_t f0 = 0; f0 < flat.numel(); f0 += kChunk) {
    const int64_t n = std::min(kChunk, flat.numel() - f0);
    const at::Tensor f = at::arange(f0, f0 + n, longs);
    const at::Tensor r = f.div(ix.inner, "floor"), i = f - r * ix.inner;
    const at::Tensor o = r.div(ix.length, "floor"), k = r - o * ix.length;
    const at::Tensor index = (o * ix.dimSize + (k + ix.start)) * ix.inner + i;
    at::Tensor values = uniformAtIndices(base, index).mul_(scale).add_(offset);
    flat.narrow(0, f0, n).copy_(values);
  }
  return out;
}

at::Tensor LoadContext::load(const std::string& name, const std::vector<int64_t>& fullShape,
                             const SliceSpec& slice) const {
  return source.loadOn(name, fullShape, slice, dtype, device);
}

}  // namespace shardscope
