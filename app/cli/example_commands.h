// `shardscope-cli examples`: lists the built-in example scripts (resources/examples/) or prints
// one.
#pragma once

#include <string>
#include <vector>

namespace shardscope::cli {

int examplesCommand(const std::vector<std::string>& args);

}  // namespace shardscope::cli
