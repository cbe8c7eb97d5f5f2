// Fuzz target: a session file (SQLite). The input is the database file's bytes. Opening it read
// only and then for writing must succeed or throw StoreError; whatever an opened store hands out
// must be usable as the CLI and the GUI use it (listing runs, reading each run and its saved
// values, summarising tensors), and a writer must be able to record a run into it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>

#include "core/store/session_store.h"
#include "core/store/value_summary.h"
#include "fuzz_support.h"

namespace {

using namespace shardscope;

const fuzz::ScratchDir& scratch() {
  static const fuzz::ScratchDir dir;
  return dir;
}

// What `shardscope-cli show --value` and replay's comparison do with a saved value.
void useValue(const trace::SavedValue& v) {
  if (!v.hasData()) return;
  store::summarize(v.tensor);
  v.tensor.toFloats();
  v.tensor.shapeString();
  for (int64_t i = 0; i < std::min<int64_t>(v.tensor.numel(), 64); ++i) v.tensor.element(i);
}

void readEverything(const store::SessionStore& s) {
  s.sessions();
  int runs = 0;
  for (const auto& summary : s.runs(/*allSessions=*/true)) {
    if (++runs > 8) break;
    fuzz::expectRefusalOrSuccess([&] {
      const store::RunRecord r = s.run(summary.id, /*withValueData=*/true);
      int values = 0;
      for (const auto& t : r.result.traces) {
        for (const auto& v : t.values) {
          if (++values > 16) return;
          useValue(v);
          fuzz::expectRefusalOrSuccess([&] { useValue(s.value(summary.id, v.name)); });
        }
      }
    });
  }
  fuzz::expectRefusalOrSuccess([&] { s.run(-1); });
}

trace::RunResult smallResult() {
  trace::RunResult r;
  r.models.push_back({"demo", "", "/nowhere", "00", "float32", "cpu", "local", 1, "0"});
  trace::TraceRecord t;
  t.invokes.push_back({{1, 2, 3}, {4}, "text", "length"});
  trace::SavedValue v;
  v.name = "h";
  v.tensor.shape = {2};
  v.tensor.bytes.resize(8);
  t.values.push_back(v);
  trace::SavedValue r2;
  r2.name = "n";
  r2.repr = "3";
  t.values.push_back(r2);
  r.traces.push_back(t);
  r.printed = "3\n";
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto dir = scratch().path();
  for (const char* suffix : {"", "-wal", "-shm", "-journal"}) {
    std::error_code ec;
    std::filesystem::remove(dir / (std::string("input.db") + suffix), ec);
  }
  const auto path = scratch().write("input.db", data, size);
  store::StoreOptions options;
  options.busyTimeoutMs = 100;
  fuzz::expectRefusalOrSuccess([&] {
    store::StoreOptions reader = options;
    reader.readOnly = true;
    const store::SessionStore s(path, reader);
    readEverything(s);
  });
  fuzz::expectRefusalOrSuccess([&] {
    store::SessionStore s(path, options);
    readEverything(s);
    const int64_t id = s.beginRun("fuzz", "print(3)\n", "fuzz.py");
    s.finishRun(id, smallResult(), store::RunStatus::Done);
    useValue(s.value(id, "h"));
  });
  return 0;
}
