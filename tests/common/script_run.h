// ScriptRun: a trace::ScriptRunner with the lines its scripts printed, as the trace suites keep
// them. The lines live on the heap, so the runner's output callback (printTo()) still points at
// them after a ScriptRun is returned by value and moved.
#pragma once

#include <QtGlobal>
#include <cctype>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/host_tensor_conversion.h"
#include "core/trace/script_runner.h"

namespace shardscope::test {

struct ScriptRun {
  std::unique_ptr<std::vector<std::string>> printed = std::make_unique<std::vector<std::string>>();
  std::vector<std::string>& lines = *printed;
  std::unique_ptr<trace::ScriptRunner> runner;

  // A RunOptions::out that appends to `lines`.
  std::function<void(const std::string&)> printTo() const {
    auto* out = printed.get();
    return [out](const std::string& line) { out->push_back(line); };
  }
  // The saved tensor `name` as a float tensor; undefined (with a warning) when there is none.
  at::Tensor tensor(const std::string& name) const {
    auto h = runner->tensorValue(name);
    if (!h) {
      qWarning("no tensor named %s", name.c_str());
      return at::Tensor();
    }
    return fromHostFloat(*h);
  }
};

// Runs `model = VLLM("<name>")` and then `body` with the options `o` (their out and note are set
// here); a script that fails leaves "ERROR: <message>" as its last line instead of throwing.
inline ScriptRun runBody(trace::RunOptions o, const std::string& name, const std::string& body,
                         const std::string& file) {
  ScriptRun r;
  o.out = r.printTo();
  o.note = [](const std::string&) {};
  r.runner = std::make_unique<trace::ScriptRunner>(o);
  try {
    r.runner->run("model = VLLM(\"" + name + "\")\n" + body, file);
  } catch (const std::exception& e) {
    r.lines.push_back(std::string("ERROR: ") + e.what());
  }
  return r;
}

// The integers of a printed list: "[1, 2, 3]" -> {1, 2, 3}.
inline std::vector<int64_t> idList(const std::string& repr) {
  std::vector<int64_t> ids;
  std::string digits;
  for (char c : repr + ",") {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
    } else if (!digits.empty()) {
      ids.push_back(std::stoll(digits));
      digits.clear();
    }
  }
  return ids;
}

}  // namespace shardscope::test
