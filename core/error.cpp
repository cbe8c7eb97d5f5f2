#include "error.h"

namespace shardscope {

bool isCollectiveAborted(const std::exception_ptr& e) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const CollectiveAborted&) {
    return true;
  } catch (...) {  // any other error: the answer is no
    return false;
  }
}

void failInvariant(const char* expr, const char* file, int line, const std::string& what) {
  throw std::logic_error(std::string("internal error at ") + file + ":" + std::to_string(line) +
                         ": " + expr + " failed: " + what + " (please report this as a bug)");
}

}  // namespace shardscope
