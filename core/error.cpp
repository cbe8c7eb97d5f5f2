#include "error.h"

namespace shardscope {

void failInvariant(const char* expr, const char* file, int line, const std::string& what) {
  throw std::logic_error(std::string("internal error at ") + file + ":" + std::to_string(line) +
                         ": " + expr + " failed: " + what + " (please report this as a bug)");
}

}  // namespace shardscope
