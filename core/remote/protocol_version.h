// The engine server protocol's version (engine_protocol.proto): client and server refuse each other
// when they differ, with a message naming both versions.
#pragma once

#include <cstdint>

namespace shardscope::remote {

// 2: the Describe job (the GUI's model view) and a script error's place in Failure.
constexpr uint32_t kProtocolVersion = 2;

// The largest request or event the server and the client accept (a script, a saved value).
constexpr int kMaxMessageBytes = 64 << 20;

}  // namespace shardscope::remote
