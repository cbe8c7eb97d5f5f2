// Thread-local state of the trace runtime on one rank thread: the device on which scripts create
// new tensors (the rank's device in a block, the CPU on the driver), and whether the running
// mediator wrote into a tensor since the flag was last taken (in-place edits of port values).
#pragma once

#include <c10/core/Device.h>

namespace shardscope::trace {

c10::Device currentDevice();
void setCurrentDevice(c10::Device d);

void noteTensorWrite();
// Returns whether a write was noted since the last call, and clears the flag.
bool takeTensorWrite();

}  // namespace shardscope::trace
