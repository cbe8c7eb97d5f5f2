// Whole-file and whole-tree helpers.
// removeTree: deletes a directory tree (like rm -rf) through POSIX nftw.
// std::filesystem::remove_all is avoided on purpose: PyTorch's libtorch exports its own copy of
// that symbol, and calling it through the pip LibTorch on the GPU machine crashes.
#pragma once

#include <filesystem>
#include <string>

namespace shardscope {

// Returns false if something could not be removed; a missing path is not an error.
bool removeTree(const std::string& path);

// A whole file's bytes; throws Error naming the file and the reason.
std::string readFile(const std::filesystem::path& path);

}  // namespace shardscope
