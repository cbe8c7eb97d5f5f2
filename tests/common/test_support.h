// Helpers shared by the test suites: where the golden data lives and which device to test on
// (SHARDSCOPE_TEST_DEVICE=cuda runs the suites with CUDA tensors on the GPU machine).
#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>

#include "core/engine/engine_types.h"
#include "core/file_tree.h"

namespace shardscope::test {

inline std::filesystem::path sourceDir() {
  return SHARDSCOPE_SOURCE_DIR;
}

inline std::filesystem::path goldenModel(const std::string& name) {
  return sourceDir() / "tests" / "golden" / "models" / name;
}

inline std::string device() {
  const char* d = std::getenv("SHARDSCOPE_TEST_DEVICE");
  return d && *d ? d : "cpu";
}

// The process group the engine suites use (SHARDSCOPE_TEST_BACKEND=nccl on a multi-GPU machine).
inline std::string backend() {
  const char* b = std::getenv("SHARDSCOPE_TEST_BACKEND");
  return b && *b ? b : "local";
}

// The same two as the engine's options take them.
inline DeviceKind deviceKind() {
  return parseDeviceKind(device());
}
inline GroupBackend groupBackend() {
  return parseGroupBackend(backend());
}

// A scratch directory removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    // $TMPDIR first, then the working directory (some sandboxes point TMPDIR nowhere).
    std::error_code ec;
    for (const auto& base :
         {std::filesystem::temp_directory_path(ec), std::filesystem::current_path()}) {
      std::string tmpl = (base / "shardscope-test-XXXXXX").string();
      if (const char* made = ::mkdtemp(tmpl.data())) {
        path_ = made;
        return;
      }
    }
    throw std::runtime_error(std::string("cannot create a temporary directory: ") +
                             std::strerror(errno));
  }
  ~TempDir() { removeTree(path_.string()); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace shardscope::test
