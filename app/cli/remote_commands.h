// `run`, `generate` and `inspect` against a shardscope-engine server (--engine HOST:PORT
// [--token-file F]): the job runs on the engine's rank processes, its printed lines and notices
// appear here as they come, and a run's session log (--log) stays with this client and records
// the engine's identity (address, ranks and their hosts, versions) with each model.
#pragma once

#include <string>

#include "arguments.h"

namespace shardscope::cli {

// The options every remote command takes.
inline const char* kEngineOptions =
    R"(  --engine HOST:PORT   run on a shardscope-engine server instead of loading the model here
                       (model options are then the engine's; see README "Engine server")
  --token-file F       the engine's access token (a file of mode 0600), when it needs one
)";

int runRemote(const Arguments& a, const std::string& source, const std::string& file);
int generateRemote(const Arguments& a);
int inspectRemote(const Arguments& a);

}  // namespace shardscope::cli
