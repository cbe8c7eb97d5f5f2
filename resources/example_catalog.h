// The example trace scripts of resources/examples/, compiled into the binaries: the seed page's
// examples and recipes (logit lens, steering, patching, ablations, expert routing). Each script
// starts with a header comment: "# Title: ...", "# Model: ..." (which model it needs) and a few
// lines saying what it shows. The CLI lists and runs them; the GUI shows them under File >
// Examples (from the Qt resource file, parsed by parseExample).
#pragma once

#include <string>
#include <vector>

namespace shardscope::examples {

struct Example {
  std::string name;         // the file's stem: "logit_lens"
  std::string title;        // "Logit lens"
  std::string model;        // what it runs on: "demo (...)" or a model name it needs mapped
  std::string description;  // the header's other lines, joined by spaces
  std::string source;       // the whole script, header included
};

// Reads the header comment of `source`; a script without a "# Title:" line is titled `name`.
Example parseExample(const std::string& name, const std::string& source);

// Every built-in example, ordered by name.
const std::vector<Example>& all();

// The example called `name`; throws shardscope::Error listing the names when there is none.
const Example& find(const std::string& name);

}  // namespace shardscope::examples
