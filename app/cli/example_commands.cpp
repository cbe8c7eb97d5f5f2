#include "example_commands.h"

#include <cstdio>
#include <iostream>

#include "arguments.h"
#include "resources/example_catalog.h"

namespace shardscope::cli {

int examplesCommand(const std::vector<std::string>& args) {
  const Arguments a(args, {}, {"help"});
  if (a.has("help")) {
    std::cout << "usage: shardscope-cli examples [NAME]\n"
                 "Lists the built-in example scripts with the model each runs on, or prints the\n"
                 "script NAME. 'shardscope-cli run --example NAME' runs one.\n";
    return 0;
  }
  if (a.positional().size() > 1) throw UsageError("examples takes at most one example name");
  if (a.positional().size() == 1) {
    std::cout << examples::find(a.positional()[0]).source;
    return 0;
  }
  for (const examples::Example& e : examples::all()) {
    std::printf("%-22s %s\n%-22s   model: %s\n", e.name.c_str(), e.title.c_str(), "",
                e.model.c_str());
  }
  std::cout
      << "\nRun one with 'shardscope-cli run --example NAME' (models other than the demo\n"
         "are mapped with --model-dir NAME=PATH); 'shardscope-cli examples NAME' prints it.\n";
  return 0;
}

}  // namespace shardscope::cli
