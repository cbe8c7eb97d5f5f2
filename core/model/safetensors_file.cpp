#include "safetensors_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "../error.h"

namespace shardscope {
namespace {

using nlohmann::json;

at::ScalarType parseDType(const std::string& s, const std::string& where) {
  if (s == "F32") return at::kFloat;
  if (s == "F16") return at::kHalf;
  if (s == "BF16") return at::kBFloat16;
  if (s == "F64") return at::kDouble;
  if (s == "I64") return at::kLong;
  if (s == "I32") return at::kInt;
  if (s == "I16") return at::kShort;
  if (s == "I8") return at::kChar;
  if (s == "U8") return at::kByte;
  if (s == "BOOL") return at::kBool;
  throw CheckpointError(
      where + ": dtype '" + s +
      "' is not supported (supported: F32, F16, BF16, F64, I64, I32, I16, I8, U8, BOOL)");
}

}  // namespace

const char* safetensorsDTypeName(at::ScalarType t) {
  switch (t) {
    case at::kFloat:
      return "F32";
    case at::kHalf:
      return "F16";
    case at::kBFloat16:
      return "BF16";
    case at::kDouble:
      return "F64";
    case at::kLong:
      return "I64";
    case at::kInt:
      return "I32";
    case at::kShort:
      return "I16";
    case at::kChar:
      return "I8";
    case at::kByte:
      return "U8";
    case at::kBool:
      return "BOOL";
    default:
      break;
  }
  throw Error(std::string("safetensors cannot store dtype ") + c10::toString(t));
}

MappedFile::MappedFile(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw CheckpointError("cannot open " + path.string() + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw CheckpointError("cannot stat " + path.string() + ": " + std::strerror(errno));
  }
  size_ = size_t(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      ::close(fd);
      throw CheckpointError("cannot mmap " + path.string() + ": " + std::strerror(errno));
    }
    data_ = static_cast<const std::byte*>(p);
  }
  ::close(fd);  // the mapping keeps the file alive
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<std::byte*>(data_), size_);
}

void MappedFile::release(size_t begin, size_t end) const {
  const size_t page = size_t(::sysconf(_SC_PAGESIZE));
  const size_t first = (begin + page - 1) / page * page;  // only whole pages inside the range
  const size_t last = end / page * page;
  if (!data_ || last <= first) return;
  ::madvise(const_cast<std::byte*>(data_) + first, last - first, MADV_DONTNEED);
}

SafetensorsFile::SafetensorsFile(const std::filesystem::path& path) : path_(path), map_(path) {
  const std::string where = path.string();
  if (map_.size() < 8) {
    throw CheckpointError(where + ": file is " + std::to_string(map_.size()) +
                          " bytes, too short for a safetensors header (truncated?)");
  }
  uint64_t headerLen = 0;
  std::memcpy(&headerLen, map_.data(), 8);
  if (headerLen > map_.size() - 8) {
    throw CheckpointError(where + ": header length " + std::to_string(headerLen) +
                          " runs past the end of the file (" + std::to_string(map_.size()) +
                          " bytes); the file is truncated or not a safetensors file");
  }
  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(map_.data()) + 8,
                         reinterpret_cast<const char*>(map_.data()) + 8 + headerLen);
  } catch (const json::exception& e) {
    throw CheckpointError(where + ": header is not valid JSON (" + e.what() + ")");
  }
  if (!header.is_object()) throw CheckpointError(where + ": header is not a JSON object");
  const size_t dataStart = 8 + headerLen;
  const size_t dataSize = map_.size() - dataStart;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") continue;
    const std::string at = where + ", tensor '" + name + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets")) {
      throw CheckpointError(at + ": entry needs dtype, shape and data_offsets");
    }
    SafetensorsEntry e;
    e.name = name;
    if (!v["dtype"].is_string()) throw CheckpointError(at + ": dtype must be a string");
    e.dtype = parseDType(v["dtype"].get<std::string>(), at);
    // The byte count the shape needs must fit in size_t: a product that wraps around would let a
    // huge shape pass as a few bytes. The strides (products of the dimensions, a 0 counted as 1)
    // must fit in int64 too, or LibTorch refuses even an empty tensor of that shape.
    size_t numel = 1;
    int64_t strideSpan = 1;
    const auto& shape = v["shape"];
    if (!shape.is_array()) throw CheckpointError(at + ": shape must be a list of dimensions");
    for (const auto& d : shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX) ||
          __builtin_mul_overflow(numel, d.get<size_t>(), &numel) ||
          __builtin_mul_overflow(strideSpan, std::max<int64_t>(d.get<int64_t>(), 1), &strideSpan)) {
        throw CheckpointError(at + ": bad shape " + shape.dump() +
                              " (its dimensions' product does not fit in 64 bits)");
      }
      e.shape.push_back(d.get<int64_t>());
    }
    size_t expected = 0;
    if (__builtin_mul_overflow(numel, at::elementSize(e.dtype), &expected))
      throw CheckpointError(at + ": bad shape " + shape.dump());
    const auto& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned()) {
      throw CheckpointError(at + ": data_offsets must be two non-negative integers");
    }
    const size_t b = off[0].get<size_t>(), en = off[1].get<size_t>();
    if (b > en || en > dataSize) {
      throw CheckpointError(at + ": data_offsets [" + std::to_string(b) + ", " +
                            std::to_string(en) + "] lie outside the " + std::to_string(dataSize) +
                            " data bytes of the file (truncated?)");
    }
    if (en - b != expected) {
      throw CheckpointError(at + ": holds " + std::to_string(en - b) +
                            " bytes but shape and dtype need " + std::to_string(expected));
    }
    e.begin = dataStart + b;
    e.end = dataStart + en;
    entries_.emplace(name, std::move(e));
  }
}

const SafetensorsEntry& SafetensorsFile::entry(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) throw CheckpointError(path_.string() + ": no tensor '" + name + "'");
  return it->second;
}

at::Tensor SafetensorsFile::view(const SafetensorsEntry& e) const {
  void* p = const_cast<std::byte*>(map_.data() + e.begin);
  const auto opts = at::TensorOptions().dtype(e.dtype);
  if (reinterpret_cast<uintptr_t>(p) % at::elementSize(e.dtype) != 0) {
    // Misaligned data (allowed by the format): copy instead of viewing.
    at::Tensor t = at::empty(e.shape, opts);
    if (e.end > e.begin) std::memcpy(t.data_ptr(), p, e.end - e.begin);  // empty: no storage
    return t;
  }
  return at::from_blob(p, e.shape, opts);
}

struct SafetensorsWriter::State {
  std::filesystem::path path, tmp;
  std::vector<Declared> entries;
  size_t next = 0;
  std::ofstream out;
  bool finished = false;
};

SafetensorsWriter::SafetensorsWriter(std::filesystem::path path, std::vector<Declared> entries,
                                     const std::map<std::string, std::string>& metadata)
    : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.path = std::move(path);
  s.tmp = s.path.string() + ".partial";
  s.entries = std::move(entries);
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  size_t offset = 0;
  for (const auto& e : s.entries) {
    int64_t numel = 1;
    for (int64_t d : e.shape) numel *= d;
    const size_t bytes = size_t(numel) * at::elementSize(e.dtype);
    header[e.name] = {{"dtype", safetensorsDTypeName(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned
  s.out.open(s.tmp, std::ios::binary | std::ios::trunc);
  if (!s.out) throw Error("cannot write " + s.tmp.string() + ": " + std::strerror(errno));
  const uint64_t n = text.size();
  s.out.write(reinterpret_cast<const char*>(&n), 8);
  s.out.write(text.data(), std::streamsize(text.size()));
}

SafetensorsWriter::~SafetensorsWriter() {
  if (state_->finished) return;
  state_->out.close();
  std::error_code ec;
  std::filesystem::remove(state_->tmp, ec);
}

void SafetensorsWriter::append(const at::Tensor& tensor) {
  State& s = *state_;
  SS_ASSERT(s.next < s.entries.size(), "more tensors appended than declared");
  const Declared& d = s.entries[s.next++];
  if (tensor.scalar_type() != d.dtype || tensor.sizes().vec() != d.shape) {
    throw Error("safetensors writer: tensor '" + d.name +
                "' does not match its declared shape and dtype");
  }
  at::Tensor h = tensor.detach().to(at::kCPU).contiguous();
  s.out.write(static_cast<const char*>(h.data_ptr()),
              std::streamsize(h.numel() * h.element_size()));
  if (!s.out) throw Error("writing " + s.tmp.string() + " failed: " + std::strerror(errno));
}

void SafetensorsWriter::finish() {
  State& s = *state_;
  SS_ASSERT(s.next == s.entries.size(), "fewer tensors appended than declared");
  s.out.flush();
  if (!s.out) throw Error("writing " + s.tmp.string() + " failed: " + std::strerror(errno));
  s.out.close();
  std::filesystem::rename(s.tmp, s.path);
  s.finished = true;
}

void writeSafetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<SafetensorsWriter::Declared> entries;
  for (const auto& [name, t] : tensors) entries.push_back({name, t.scalar_type(), t.sizes().vec()});
  SafetensorsWriter writer(path, std::move(entries), metadata);
  for (const auto& [name, t] : tensors) writer.append(t);
  writer.finish();
}

}  // namespace shardscope
