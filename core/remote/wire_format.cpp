#include "wire_format.h"

#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace shardscope::remote {

void toWire(const SamplingParams& s, v1::Sampling& out) {
  out.set_temperature(s.temperature);
  out.set_top_k(s.topK);
  out.set_top_p(s.topP);
  out.set_seed(s.seed);
  out.set_max_tokens(s.maxTokens);
  for (int64_t id : s.stopTokenIds) out.add_stop_token_ids(id);
  out.set_ignore_eos(s.ignoreEos);
  for (const auto& stop : s.stop) out.add_stop(stop);
}

SamplingParams fromWire(const v1::Sampling& s) {
  SamplingParams p;
  p.temperature = s.temperature();
  p.topK = s.top_k();
  p.topP = s.top_p();
  p.seed = s.seed();
  p.maxTokens = s.max_tokens();
  p.stopTokenIds.assign(s.stop_token_ids().begin(), s.stop_token_ids().end());
  p.ignoreEos = s.ignore_eos();
  p.stop.assign(s.stop().begin(), s.stop().end());
  return p;
}

void toWire(const HostTensor& t, v1::Tensor& out) {
  out.set_dtype(dtypeName(t.dtype));
  for (int64_t s : t.shape) out.add_shape(s);
  out.set_data(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size());
}

HostTensor fromWire(const v1::Tensor& t) {
  HostTensor h;
  h.dtype = dtypeFromName(t.dtype());
  int64_t numel = 1;
  for (int64_t s : t.shape()) {
    if (s < 0 || (s > 0 && numel > INT64_MAX / s))
      throw Error("a tensor in the message has a bad shape");
    numel *= s;
    h.shape.push_back(s);
  }
  if (uint64_t(numel) * dtypeSize(h.dtype) != t.data().size())
    throw Error("a tensor in the message holds " + std::to_string(t.data().size()) +
                " bytes, but its shape and dtype need " +
                std::to_string(uint64_t(numel) * dtypeSize(h.dtype)));
  h.bytes.resize(t.data().size());
  std::memcpy(h.bytes.data(), t.data().data(), t.data().size());
  return h;
}

namespace {

void modelToWire(const trace::ModelIdentity& m, v1::ModelIdentity& out) {
  out.set_name(m.name);
  out.set_spec(m.spec);
  out.set_path(m.path);
  out.set_config_sha256(m.configSha256);
  out.set_dtype(m.dtype);
  out.set_device(m.device);
  out.set_backend(m.backend);
  out.set_tp(m.tp);
  out.set_engine_version(m.engineVersion);
}

trace::ModelIdentity modelFromWire(const v1::ModelIdentity& m) {
  trace::ModelIdentity out;
  out.name = m.name();
  out.spec = m.spec();
  out.path = m.path();
  out.configSha256 = m.config_sha256();
  out.dtype = m.dtype();
  out.device = m.device();
  out.backend = m.backend();
  out.tp = m.tp();
  out.engineVersion = m.engine_version();
  return out;
}

void traceToWire(const trace::TraceRecord& t, v1::TraceRecord& out) {
  out.set_model_index(t.modelIndex);
  remote::toWire(t.sampling, *out.mutable_sampling());
  out.set_has_timing(t.timing.has_value());
  if (t.timing) {
    out.set_wall_seconds(t.timing->wallSeconds);
    out.set_steps(t.timing->steps);
  }
  for (const auto& i : t.invokes) {
    auto& o = *out.add_invokes();
    for (int64_t id : i.promptIds) o.add_prompt_ids(id);
    for (int64_t id : i.tokenIds) o.add_token_ids(id);
    o.set_text(i.text);
    o.set_finish_reason(i.finishReason);
  }
  for (const auto& v : t.values) {
    auto& o = *out.add_values();
    o.set_name(v.name);
    o.set_has_repr(v.repr.has_value());
    if (v.repr) o.set_repr(*v.repr);
    if (v.isTensor()) remote::toWire(v.tensor, *o.mutable_tensor());
  }
}

trace::TraceRecord traceFromWire(const v1::TraceRecord& t) {
  trace::TraceRecord out;
  out.modelIndex = t.model_index();
  out.sampling = remote::fromWire(t.sampling());
  if (t.has_timing()) out.timing = trace::TraceTiming{t.wall_seconds(), t.steps()};
  for (const auto& i : t.invokes()) {
    trace::InvokeRecord r;
    r.promptIds.assign(i.prompt_ids().begin(), i.prompt_ids().end());
    r.tokenIds.assign(i.token_ids().begin(), i.token_ids().end());
    r.text = i.text();
    r.finishReason = i.finish_reason();
    out.invokes.push_back(std::move(r));
  }
  for (const auto& v : t.values()) {
    trace::SavedValue s;
    s.name = v.name();
    if (v.has_repr()) {
      s.repr = v.repr();
    } else {
      s.tensor = remote::fromWire(v.tensor());
    }
    out.values.push_back(std::move(s));
  }
  return out;
}

}  // namespace

void toWire(const trace::RunResult& r, v1::RunResult& out) {
  for (const auto& m : r.models) modelToWire(m, *out.add_models());
  for (const auto& t : r.traces) traceToWire(t, *out.add_traces());
  out.set_printed(r.printed);
}

trace::RunResult fromWire(const v1::RunResult& r) {
  trace::RunResult out;
  for (const auto& m : r.models()) out.models.push_back(modelFromWire(m));
  for (const auto& t : r.traces()) {
    out.traces.push_back(traceFromWire(t));
    if (out.traces.back().modelIndex < 0 || out.traces.back().modelIndex >= int(out.models.size()))
      throw Error("a trace in the engine's result names a model it does not list");
  }
  out.printed = r.printed();
  return out;
}

namespace {

void moduleToWire(const ModuleInfo& m, v1::ModuleInfo& out) {
  out.set_path(m.path);
  out.set_name(m.name);
  out.set_kind(m.kind);
  out.set_depth(m.depth);
  out.set_stage(m.stage);
  out.set_layer(m.layer + 1);  // proto3's default 0 stays "no layer" for an older peer
  for (const PortInfo& p : m.ports) {
    auto& o = *out.add_ports();
    o.set_name(p.name);
    o.set_shard_kind(p.shardKind);
  }
  for (const ParameterInfo& p : m.parameters) {
    auto& o = *out.add_parameters();
    o.set_name(p.name);
    for (int64_t d : p.shardShape) o.add_shard_shape(d);
    for (int64_t d : p.fullShape) o.add_full_shape(d);
  }
}

ModuleInfo moduleFromWire(const v1::ModuleInfo& m) {
  ModuleInfo out;
  out.path = m.path();
  out.name = m.name();
  out.kind = m.kind();
  out.depth = m.depth();
  out.stage = m.stage();
  out.layer = m.layer() - 1;
  for (const auto& p : m.ports()) out.ports.push_back({p.name(), p.shard_kind()});
  for (const auto& p : m.parameters()) {
    out.parameters.push_back({p.name(),
                              {p.shard_shape().begin(), p.shard_shape().end()},
                              {p.full_shape().begin(), p.full_shape().end()}});
  }
  return out;
}

}  // namespace

void toWire(const ModelInfo& m, v1::ModelInfo& out) {
  out.set_spec(m.spec);
  out.set_path(m.path);
  out.set_family(m.family);
  out.set_config_sha256(m.configSha256);
  out.set_dtype(m.dtype);
  out.set_device(m.device);
  out.set_backend(m.backend);
  for (const auto& h : m.rankHosts) out.add_rank_hosts(h);
  out.set_tp(m.tp);
  out.set_pp(m.pp);
  out.set_intra_op_threads(m.intraOpThreads);
  out.set_expert_parallel(m.expertParallel);
  out.set_dcp(m.dcp);
  out.set_kv_cache_bytes_per_token(m.kvCacheBytesPerToken);
  out.set_vocab_size(m.vocabSize);
  out.set_num_layers(m.numLayers);
  out.set_num_heads(m.numHeads);
  out.set_num_kv_heads(m.numKvHeads);
  out.set_head_dim(m.headDim);
  out.set_hidden_size(m.hiddenSize);
  out.set_num_experts(m.numExperts);
  out.set_experts_per_token(m.expertsPerToken);
  for (int64_t id : m.eosTokenIds) out.add_eos_token_ids(id);
  for (const ModuleInfo& module : m.modules) moduleToWire(module, *out.add_modules());
}

ModelInfo fromWire(const v1::ModelInfo& m) {
  ModelInfo out;
  out.spec = m.spec();
  out.path = m.path();
  out.family = m.family();
  out.configSha256 = m.config_sha256();
  out.dtype = m.dtype();
  out.device = m.device();
  out.backend = m.backend();
  out.rankHosts.assign(m.rank_hosts().begin(), m.rank_hosts().end());
  out.tp = m.tp();
  out.pp = m.pp();
  out.intraOpThreads = m.intra_op_threads();
  out.expertParallel = m.expert_parallel();
  out.dcp = m.dcp();
  out.kvCacheBytesPerToken = m.kv_cache_bytes_per_token();
  out.vocabSize = m.vocab_size();
  out.numLayers = m.num_layers();
  out.numHeads = m.num_heads();
  out.numKvHeads = m.num_kv_heads();
  out.headDim = m.head_dim();
  out.hiddenSize = m.hidden_size();
  out.numExperts = m.num_experts();
  out.expertsPerToken = m.experts_per_token();
  out.eosTokenIds.assign(m.eos_token_ids().begin(), m.eos_token_ids().end());
  // Views index heads and layers by these: a peer's nonsense fails here, not in a view.
  if (out.tp < 1 || out.pp < 1 || out.dcp < 1 || out.numLayers < 0 || out.numHeads < 0 ||
      out.numKvHeads < 0 || out.headDim < 0 || out.vocabSize < 0 || out.numExperts < 0)
    throw Error("the engine's model description has a negative size or a parallel size below 1");
  for (const auto& module : m.modules()) out.modules.push_back(moduleFromWire(module));
  return out;
}

void toWire(const PortShape& s, v1::PortShape& out) {
  out.set_module(s.module);
  out.set_port(s.port);
  out.set_shard_kind(s.shardKind);
  for (const auto& shape : s.shard)
    out.add_shard()->mutable_dims()->Add(shape.begin(), shape.end());
  for (const auto& shape : s.whole)
    out.add_whole()->mutable_dims()->Add(shape.begin(), shape.end());
  out.set_tuple(s.tuple);
}

PortShape fromWire(const v1::PortShape& s) {
  PortShape out;
  out.module = s.module();
  out.port = s.port();
  out.shardKind = s.shard_kind();
  for (const auto& shape : s.shard())
    out.shard.emplace_back(shape.dims().begin(), shape.dims().end());
  for (const auto& shape : s.whole())
    out.whole.emplace_back(shape.dims().begin(), shape.dims().end());
  out.tuple = s.tuple();
  return out;
}

}  // namespace shardscope::remote
