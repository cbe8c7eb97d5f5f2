// Helpers shared by the test suites: where the golden data lives and which device to test on
// (SHARDSCOPE_TEST_DEVICE=cuda runs the suites with CUDA tensors on the GPU machine).
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

namespace shardscope::test {

inline std::filesystem::path sourceDir() { return SHARDSCOPE_SOURCE_DIR; }

inline std::filesystem::path goldenModel(const std::string& name) {
  return sourceDir() / "tests" / "golden" / "models" / name;
}

inline std::string device() {
  const char* d = std::getenv("SHARDSCOPE_TEST_DEVICE");
  return d && *d ? d : "cpu";
}

// A scratch directory removed when the object goes away.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "shardscope-test-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace shardscope::test
