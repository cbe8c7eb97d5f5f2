#include "example_catalog.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "examples_data.h"

namespace shardscope::examples {
namespace {

// The text after `prefix` when `line` starts with it.
bool field(const std::string& line, const std::string& prefix, std::string* value) {
  if (line.compare(0, prefix.size(), prefix) != 0) return false;
  *value = line.substr(prefix.size());
  return true;
}

}  // namespace

Example parseExample(const std::string& name, const std::string& source) {
  Example e{name, name, {}, {}, source};
  std::istringstream in(source);
  std::string line, text;
  while (std::getline(in, line) && line.compare(0, 1, "#") == 0) {
    if (field(line, "# Title: ", &e.title) || field(line, "# Model: ", &e.model)) continue;
    if (field(line, "# ", &text) || field(line, "#", &text))
      e.description += (e.description.empty() ? "" : " ") + text;
  }
  return e;
}

const std::vector<Example>& all() {
  static const std::vector<Example> examples = [] {
    std::vector<Example> out;
    for (size_t i = 0; i < kEmbeddedExampleCount; ++i)
      out.push_back(parseExample(kEmbeddedExamples[i].name, kEmbeddedExamples[i].source));
    std::sort(out.begin(), out.end(),
              [](const Example& a, const Example& b) { return a.name < b.name; });
    return out;
  }();
  return examples;
}

const Example& find(const std::string& name) {
  std::string names;
  for (const Example& e : all()) {
    if (e.name == name) return e;
    names += (names.empty() ? "" : ", ") + e.name;
  }
  throw Error("there is no example called '" + name + "'; the examples are " + names +
              " ('shardscope-cli examples' lists them with what each needs)");
}

}  // namespace shardscope::examples
