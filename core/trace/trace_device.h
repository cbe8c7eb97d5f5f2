// Thread-local state of the trace runtime on one rank thread: the device on which scripts create
// new tensors (the rank's device in a block, the CPU on the driver). (Writes into port values are
// noted on each mediator's Interpreter, not here.)
#pragma once

#include <c10/core/Device.h>

namespace shardscope::trace {

c10::Device currentDevice();
void setCurrentDevice(c10::Device d);

}  // namespace shardscope::trace
