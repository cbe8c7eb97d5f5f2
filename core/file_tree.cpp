#include "file_tree.h"

#include <ftw.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "error.h"

namespace shardscope {

bool removeTree(const std::string& path) {
  if (::access(path.c_str(), F_OK) != 0) return true;
  const auto remove = [](const char* p, const struct stat*, int, struct FTW*) {
    return std::remove(p);
  };
  return ::nftw(path.c_str(), remove, 16, FTW_DEPTH | FTW_PHYS) == 0;
}

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read " + path.string() + ": " + std::strerror(errno));
  std::stringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error("reading " + path.string() + " failed: " + std::strerror(errno));
  return ss.str();
}

}  // namespace shardscope
