// WeightSource: where a rank's parameter shards come from. Layers ask for their slice of a tensor
// named as in the Hugging Face checkpoint, with the full shape they expect; the source checks the
// shape and materialises only that slice.
//   SafetensorsSource: a checkpoint directory (single file or sharded with an index), mmapped.
//   RandomSource: deterministic values from a seed, computed per element index of the full
//   tensor, so a rank's slice equals the same slice of the tp=1 tensor without the full tensor
//   ever existing (Qwen3-8B widths in tests and benchmarks without multi-GB files); made on the
//   rank's device (loadOn), bit for bit the host's values.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

namespace shardscope {

class SafetensorsFile;

// The part of a full tensor a rank wants: `length` rows of dimension `dim` from `start`.
struct SliceSpec {
  int64_t dim = -1;  // -1: the whole tensor
  int64_t start = 0;
  int64_t length = 0;

  static SliceSpec whole() { return {}; }
  static SliceSpec along(int64_t dim, int64_t start, int64_t length) {
    return {dim, start, length};
  }
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // This rank's slice of `name` as a contiguous CPU tensor of `dtype`. Throws CheckpointError if
  // the tensor is missing or its shape is not `fullShape`. Thread-safe.
  virtual at::Tensor load(const std::string& name, const std::vector<int64_t>& fullShape,
                          const SliceSpec& slice, at::ScalarType dtype) = 0;
  // The same slice on `device`; sources that can make it there directly override this.
  virtual at::Tensor loadOn(const std::string& name, const std::vector<int64_t>& fullShape,
                            const SliceSpec& slice, at::ScalarType dtype, at::Device device) {
    return load(name, fullShape, slice, dtype).to(device);
  }
  // Throws CheckpointError naming any tensor the model never asked for.
  virtual void checkAllUsed() const = 0;
  // Marks a tensor the model knowingly ignores (e.g. lm_head.weight of a tied model).
  virtual void ignore(const std::string& name) = 0;
  virtual std::string describe() const = 0;
};

class SafetensorsSource : public WeightSource {
 public:
  explicit SafetensorsSource(const std::filesystem::path& dir);
  ~SafetensorsSource() override;

  at::Tensor load(const std::string& name, const std::vector<int64_t>& fullShape,
                  const SliceSpec& slice, at::ScalarType dtype) override;
  void checkAllUsed() const override;
  void ignore(const std::string& name) override;
  std::string describe() const override { return dir_.string(); }

 private:
  std::filesystem::path dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const SafetensorsFile*> byName_;
  mutable std::mutex mutex_;
  std::set<std::string> used_;
};

class RandomSource : public WeightSource {
 public:
  explicit RandomSource(uint64_t seed) : seed_(seed) {}

  at::Tensor load(const std::string& name, const std::vector<int64_t>& fullShape,
                  const SliceSpec& slice, at::ScalarType dtype) override;
  // Off the CPU the values are made where they will live, by makeWithTensorOps: a 61 GB
  // Qwen3-30B-A3B is made on a GPU in seconds instead of minutes of host hashing and copying.
  at::Tensor loadOn(const std::string& name, const std::vector<int64_t>& fullShape,
                    const SliceSpec& slice, at::ScalarType dtype, at::Device device) override;
  // The values `load` makes, bit for bit, computed with ATen's integer ops on `device`.
  at::Tensor makeWithTensorOps(const std::string& name, const std::vector<int64_t>& fullShape,
                               const SliceSpec& slice, at::ScalarType dtype,
                               at::Device device) const;
  void checkAllUsed() const override {}
  void ignore(const std::string&) override {}
  std::string describe() const override { return "random weights, seed " + std::to_string(seed_); }

 private:
  uint64_t seed_;
};

std::string shapeToString(const std::vector<int64_t>& shape);

}  // namespace shardscope
