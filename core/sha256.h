// SHA-256 of a byte string, as lowercase hex.
#pragma once

#include <string>

namespace shardscope {

std::string sha256Hex(const std::string& bytes);

}  // namespace shardscope
