// What every fuzz target shares: the rule for which exceptions are expected, and a scratch file
// for inputs that the code under test reads from disk.
//
// An input may make the code under test throw shardscope::Error or a subclass (the documented
// user-error types: CheckpointError, ScriptError, StoreError, ...): that is a refusal, the
// expected outcome for bad input. Anything else is a finding: a sanitizer report, a crash, a hang,
// or an exception of another type (std::out_of_range, nlohmann::json's type_error, std::bad_alloc,
// or std::logic_error from a broken SS_ASSERT). expectRefusalOrSuccess() prints such an exception
// and aborts, so libFuzzer records the input as a crash and the replay test fails.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "core/error.h"
#include "core/file_tree.h"

namespace shardscope::fuzz {

template <class F>
void expectRefusalOrSuccess(F&& body) {
  try {
    body();
  } catch (const Error&) {
    // A refusal with a message: what bad input should get.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: unexpected exception %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: unexpected exception of a non-standard type\n");
    std::abort();
  }
}

// A directory of this process (in /dev/shm when there is one: inputs are written per execution),
// removed at exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::error_code ec;
    for (const std::filesystem::path& base :
         {std::filesystem::path("/dev/shm"), std::filesystem::temp_directory_path(ec)}) {
      if (base.empty() || !std::filesystem::is_directory(base, ec)) continue;
      std::string tmpl = (base / "shardscope-fuzz-XXXXXX").string();
      if (::mkdtemp(tmpl.data())) {
        path_ = tmpl;
        return;
      }
    }
    std::fprintf(stderr, "fuzz: cannot create a scratch directory\n");
    std::abort();
  }
  ~ScratchDir() { removeTree(path_.string()); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

  // Writes `size` bytes to `name` in the directory (replacing it) and returns its path.
  std::filesystem::path write(const std::string& name, const void* data, size_t size) const {
    const auto p = path_ / name;
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(static_cast<const char*>(data), std::streamsize(size));
    if (!out) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", p.c_str());
      std::abort();
    }
    return p;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace shardscope::fuzz
