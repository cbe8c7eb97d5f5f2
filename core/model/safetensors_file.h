// SafetensorsFile: a read-only memory map of one .safetensors file. The header is parsed and every
// entry validated (dtype, shape, offsets inside the file) when the file is opened; tensors are
// zero-copy views of the mapping, so a rank that slices one touches only the pages it reads.
//
// Format: 8-byte little-endian header length N, N bytes of JSON {name: {dtype, shape,
// data_offsets: [begin, end]}, "__metadata__": {...}}, then the data; offsets are relative to the
// end of the header.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace shardscope {

struct SafetensorsEntry {
  std::string name;
  at::ScalarType dtype = at::kFloat;
  std::vector<int64_t> shape;
  size_t begin = 0;  // absolute byte offsets in the file
  size_t end = 0;
};

// RAII owner of a read-only mmap.
class MappedFile {
 public:
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the pages of [begin, end) from this process's resident set (the page cache keeps them).
  void release(size_t begin, size_t end) const;

 private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

class SafetensorsFile {
 public:
  explicit SafetensorsFile(const std::filesystem::path& path);

  const std::filesystem::path& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const SafetensorsEntry& entry(const std::string& name) const;
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }

  // Zero-copy CPU view of the mapped bytes (read only: never write through it).
  at::Tensor view(const SafetensorsEntry& e) const;
  // Drops the mapped pages of the absolute byte range [begin, end).
  void release(size_t begin, size_t end) const { map_.release(begin, end); }

 private:
  std::filesystem::path path_;
  MappedFile map_;
  std::map<std::string, SafetensorsEntry> entries_;
};

// Streams a safetensors file whose entries are declared up front: the header is written first,
// then each tensor in declaration order, so a multi-GB checkpoint never sits in memory whole.
// Written beside its destination and renamed into place by finish(); abandoned files are removed.
class SafetensorsWriter {
 public:
  struct Declared {
    std::string name;
    at::ScalarType dtype;
    std::vector<int64_t> shape;
  };
  SafetensorsWriter(std::filesystem::path path, std::vector<Declared> entries,
                    const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();
  // Appends the next declared tensor; its shape and dtype must match the declaration.
  void append(const at::Tensor& tensor);
  void finish();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Writes tensors (any device, made contiguous on the CPU) as one safetensors file. The file is
// written beside its destination and renamed into place, so a failure never leaves a partial file.
void writeSafetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

const char* safetensorsDTypeName(at::ScalarType t);

}  // namespace shardscope
