#include "file_tree.h"

#include <ftw.h>
#include <unistd.h>

#include <cstdio>

namespace shardscope {

bool removeTree(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return true;
  const auto remove = [](const char* p, const struct stat*, int, struct FTW*) {
    return std::remove(p);
  };
  return ::nftw(path.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

}  // namespace shardscope
