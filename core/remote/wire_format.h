// Conversions between the engine protocol's messages (engine_protocol.proto) and core's plain
// types. Reading checks what a peer sent (dtype names, byte counts against shapes) and throws
// Error naming the field, so a malformed message fails its call only.
#pragma once

#include "core/engine/engine_types.h"
#include "core/engine/port_probe.h"
#include "core/remote/engine_protocol.pb.h"
#include "core/trace/trace_record.h"

namespace shardscope::remote {

void toWire(const SamplingParams& s, v1::Sampling& out);
SamplingParams fromWire(const v1::Sampling& s);

void toWire(const HostTensor& t, v1::Tensor& out);
HostTensor fromWire(const v1::Tensor& t);

void toWire(const trace::RunResult& r, v1::RunResult& out);
trace::RunResult fromWire(const v1::RunResult& r);

// The model a client shows (Describe): module tree and port shapes.
void toWire(const ModelInfo& m, v1::ModelInfo& out);
ModelInfo fromWire(const v1::ModelInfo& m);
void toWire(const PortShape& s, v1::PortShape& out);
PortShape fromWire(const v1::PortShape& s);

}  // namespace shardscope::remote
