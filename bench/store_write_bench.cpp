// Session-log write throughput: saved values recorded through SessionStore (one transaction per
// run, WAL) against a plain file write of the same bytes in the same process (the peer), and
// against a memcpy of those bytes (the floor of moving them at all).
//
//   store_write_bench [DIR] [--runs N] [--values-per-run K] [--value-mb M]
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "core/file_tree.h"
#include "core/store/session_store.h"

using namespace shardscope;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

HostTensor payload(int64_t floats, int salt) {
  HostTensor t;
  t.dtype = DType::F32;
  t.shape = {floats};
  t.bytes.resize(size_t(floats) * 4);
  for (int64_t i = 0; i < floats; ++i) {
    const float x = float(i % 4093) * 0.25f + float(salt);
    std::memcpy(t.bytes.data() + i * 4, &x, 4);
  }
  return t;
}

// write() every value, then fdatasync once per run (as a commit would make it durable).
double plainWrite(const std::filesystem::path& file, const trace::RunResult& run, int runs,
                  bool sync) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw Error("cannot create " + file.string());
  const auto t = Clock::now();
  for (int r = 0; r < runs; ++r) {
    for (const auto& v : run.traces[0].values) {
      size_t done = 0;
      while (done < v.tensor.bytes.size()) {
        const ssize_t n = ::write(fd, v.tensor.bytes.data() + done, v.tensor.bytes.size() - done);
        if (n <= 0) throw Error("write failed on " + file.string());
        done += size_t(n);
      }
    }
    if (sync) ::fdatasync(fd);
  }
  const double s = since(t);
  ::close(fd);
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  std::filesystem::path dir = std::filesystem::temp_directory_path() / "shardscope-store-bench";
  int runs = 8, perRun = 16;
  double valueMb = 8;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--runs" && i + 1 < argc)
      runs = std::stoi(argv[++i]);
    else if (a == "--values-per-run" && i + 1 < argc)
      perRun = std::stoi(argv[++i]);
    else if (a == "--value-mb" && i + 1 < argc)
      valueMb = std::stod(argv[++i]);
    else
      dir = a;
  }
  removeTree(dir.string());
  std::filesystem::create_directories(dir);
  trace::RunResult run;
  run.traces.resize(1);
  const int64_t floats = int64_t(valueMb * 1e6 / 4);
  for (int i = 0; i < perRun; ++i) {
    trace::SavedValue v;
    v.name = "layers[" + std::to_string(i) + "].o_proj.input";
    v.tensor = payload(floats, i);
    run.traces[0].values.push_back(std::move(v));
  }
  const double mbPerRun = double(perRun) * double(floats) * 4 / 1e6;
  const double totalMb = mbPerRun * runs;

  // Floor: copying the bytes once in memory.
  std::vector<std::byte> sink(size_t(floats) * 4);
  auto t = Clock::now();
  for (int r = 0; r < runs; ++r) {
    for (const auto& v : run.traces[0].values)
      std::memcpy(sink.data(), v.tensor.bytes.data(), v.tensor.bytes.size());
  }
  const double memcpyS = since(t);

  const double plainS = plainWrite(dir / "plain.bin", run, runs, /*sync=*/false);
  const double plainSyncS = plainWrite(dir / "plain-sync.bin", run, runs, /*sync=*/true);

  double storeS = 0;
  {
    store::SessionStore s(dir / "bench.db", {.valueCapBytes = 900'000'000});
    t = Clock::now();
    for (int r = 0; r < runs; ++r) {
      const int64_t id = s.beginRun("bench", "", "bench");
      s.finishRun(id, run, store::RunStatus::Done);
    }
    storeS = since(t);
  }
  const auto dbBytes = std::filesystem::file_size(dir / "bench.db");
  std::printf("store write bench: %d runs x %d values x %.1f MB = %.0f MB, in %s\n", runs, perRun,
              double(floats) * 4 / 1e6, totalMb, dir.c_str());
  std::printf("  memcpy (floor)            %8.1f MB/s\n", totalMb / memcpyS);
  std::printf("  plain write()             %8.1f MB/s\n", totalMb / plainS);
  std::printf("  plain write() + fdatasync %8.1f MB/s\n", totalMb / plainSyncS);
  std::printf("  SessionStore (WAL)        %8.1f MB/s   file %.0f MB\n", totalMb / storeS,
              double(dbBytes) / 1e6);
  std::printf(
      "  store / plain write: %.2f   store / plain+fdatasync: %.2f   store / memcpy: %.3f\n",
      plainS / storeS, plainSyncS / storeS, memcpyS / storeS);
  removeTree(dir.string());
  return 0;
}
