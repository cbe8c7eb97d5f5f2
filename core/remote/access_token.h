// Who may use an engine server. A loopback address serves the local machine's users without more;
// any other address is refused unless the server has an access token, read from a file that only
// its owner can read (mode 0600), which every call must present and which is compared in
// constant time.
#pragma once

#include <filesystem>
#include <string>

namespace shardscope::remote {

// The gRPC metadata key a client sends its token under.
constexpr const char* kTokenHeader = "x-shardscope-token";

// "127.0.0.1:5000", "localhost:5000", "[::1]:5000": true. Throws Error for an address without a
// port.
bool isLoopback(const std::string& hostPort);

// The token in `path`: its first line, trimmed. Throws Error when the file is missing, not a
// regular file, readable or writable by group or others, or empty.
std::string readTokenFile(const std::filesystem::path& path);

// Equal contents, in time that depends only on the lengths (no early exit on the first mismatch).
bool tokensEqual(const std::string& presented, const std::string& expected);

// Throws Error (what to do instead) when `hostPort` is not loopback and there is no token.
void checkListenAddress(const std::string& hostPort, bool haveToken);

}  // namespace shardscope::remote
