#include "access_token.h"

#include <sys/stat.h>

#include <fstream>

#include "core/error.h"

namespace shardscope::remote {

bool isLoopback(const std::string& hostPort) {
  const auto colon = hostPort.rfind(':');
  if (colon == std::string::npos || colon + 1 == hostPort.size())
    throw Error("'" + hostPort + "' has no port; use HOST:PORT, e.g. 127.0.0.1:50051");
  std::string host = hostPort.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string readTokenFile(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw Error("token file " + path.string() + " not found");
  if (!S_ISREG(st.st_mode)) throw Error("token file " + path.string() + " is not a regular file");
  if (st.st_mode & 077) {
    throw Error("token file " + path.string() +
                " can be read or written by other users; make it private: chmod 600 " +
                path.string());
  }
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t'))
    token.pop_back();
  if (token.empty())
    throw Error("token file " + path.string() +
                " is empty; put a long random token in it, e.g. `openssl rand -hex 32 > FILE`");
  return token;
}

bool tokensEqual(const std::string& presented, const std::string& expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  const size_t n = expected.size();
  for (size_t i = 0; i < n; ++i) {
    const unsigned char p = i < presented.size() ? static_cast<unsigned char>(presented[i]) : 0;
    diff |= static_cast<unsigned char>(p ^ static_cast<unsigned char>(expected[i]));
  }
  return diff == 0;
}

void checkListenAddress(const std::string& hostPort, bool haveToken) {
  if (isLoopback(hostPort) || haveToken) return;
  throw Error("refusing to listen on " + hostPort +
              ", which other machines can reach, without an access token: pass --token-file F "
              "(a file with mode 0600 holding the token), or listen on 127.0.0.1 and reach it "
              "through an SSH tunnel (ssh -L PORT:127.0.0.1:PORT host)");
}

}  // namespace shardscope::remote
