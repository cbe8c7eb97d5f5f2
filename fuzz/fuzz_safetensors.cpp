// Fuzz target: a .safetensors file (8-byte header length, JSON header, data). The input is the
// whole file. Opening must validate every entry or throw CheckpointError; each entry of an opened
// file must view its bytes, and small files must survive a write and re-read unchanged.
#include <ATen/ATen.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "core/model/safetensors_file.h"
#include "fuzz_support.h"

namespace {

const shardscope::fuzz::ScratchDir& scratch() {
  static const shardscope::fuzz::ScratchDir dir;
  return dir;
}

[[noreturn]] void mismatch(const std::string& what) {
  std::fprintf(stderr, "fuzz: safetensors round trip changed %s\n", what.c_str());
  std::abort();
}

}  // namespace

#ifdef SHARDSCOPE_LIBFUZZER
extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

// Most mutations of a whole file change the JSON's length and so break the 8-byte length in front
// of it, and the file is refused before its entries are looked at. Seven times in eight this
// mutates the JSON (or the data after it) and writes the new length; the eighth mutates the bytes
// as they are, the length included.
extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize,
                                          unsigned seed) {
  uint64_t headerLen = 0;
  if (size >= 8) std::memcpy(&headerLen, data, 8);
  if (seed % 8 == 0 || size < 8 || headerLen > size - 8)
    return LLVMFuzzerMutate(data, size, maxSize);
  const bool mutateData = seed % 8 == 1 && headerLen < size - 8;
  uint8_t* part = data + 8 + (mutateData ? headerLen : 0);
  const size_t partLen = mutateData ? size - 8 - headerLen : headerLen;
  std::vector<uint8_t> rest(part + partLen, data + size);
  std::vector<uint8_t> buffer(part, part + partLen);
  buffer.resize(maxSize - 8 - (mutateData ? headerLen : 0) - rest.size());
  const size_t n = LLVMFuzzerMutate(buffer.data(), partLen, buffer.size());
  std::copy(buffer.begin(), buffer.begin() + long(n), part);
  std::copy(rest.begin(), rest.end(), part + n);
  if (!mutateData) {
    headerLen = n;
    std::memcpy(data, &headerLen, 8);
  }
  return size - partLen + n;
}
#endif

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto path = scratch().write("input.safetensors", data, size);
  shardscope::fuzz::expectRefusalOrSuccess([&] {
    const shardscope::SafetensorsFile file(path);
    std::vector<std::pair<std::string, at::Tensor>> tensors;
    for (const auto& [name, e] : file.entries()) {
      const at::Tensor t = file.view(file.entry(name));
      if (t.numel() <= (1 << 16)) t.to(at::kDouble).sum();  // reads every element
      file.release(e.begin, e.end);
      tensors.emplace_back(name, t);
    }
    const auto copy = scratch().path() / "copy.safetensors";
    shardscope::writeSafetensors(copy, tensors, {{"format", "pt"}});
    const shardscope::SafetensorsFile back(copy);
    if (back.entries().size() != file.entries().size()) mismatch("the number of entries");
    for (const auto& [name, t] : tensors) {
      if (!back.contains(name)) mismatch("the names (" + name + " is missing)");
      const at::Tensor u = back.view(back.entry(name));
      if (u.scalar_type() != t.scalar_type() || u.sizes() != t.sizes()) mismatch(name);
      const size_t bytes = size_t(t.numel()) * t.element_size();
      if (bytes && std::memcmp(u.data_ptr(), t.data_ptr(), bytes) != 0) mismatch(name + "'s bytes");
    }
  });
  return 0;
}
