// Plain request and result types of the engine's public API (no LibTorch), shared by the CLI, the
// session store and the UI.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "../host_tensor.h"
#include "../model/failure_injection.h"
#include "../parallel/head_layout.h"

namespace shardscope {

class Tokenizer;
class RankProcess;

struct SamplingParams {
  double temperature = 0.0;  // 0: greedy
  int64_t topK = 0;          // 0: off
  double topP = 1.0;
  uint64_t seed = 0;
  int64_t maxTokens = 16;
  std::vector<int64_t> stopTokenIds;  // in addition to the model's EOS ids
  bool ignoreEos = false;
  // vLLM's `stop`: a request ends once its text contains one of these; the reported text ends
  // before it (token ids keep every generated token). Needs the model's tokenizer.
  std::vector<std::string> stop;
};

struct GenerateRequest {
  std::vector<std::vector<int64_t>> prompts;  // one request per prompt, batched in each step
  SamplingParams sampling;
  bool returnLogits = false;  // keep each step's [V] logits of every request (float32)
  std::shared_ptr<const Tokenizer> tokenizer;  // decodes generated text for stop strings
};

struct RequestOutput {
  std::vector<int64_t> promptIds;
  std::vector<int64_t> tokenIds;  // generated tokens
  std::string finishReason;       // "length", "stop", "cancelled"
  HostTensor logits;              // [steps, V] when asked for
};

struct GenerateResult {
  std::vector<RequestOutput> outputs;
  int64_t steps = 0;
  double seconds = 0;
  int64_t graphLayers = 0;           // decoder layers that ran from CUDA graphs, summed over steps
  int64_t segmentedLayers = 0;       // of those, layers cut at the ports a trace waited on
  int64_t segmentedFusedLayers = 0;  // of those, layers whose attention ran fused
  int64_t aheadSteps = 0;  // steps launched before the host had read the step before (greedy)
};

struct JobProgress {
  int64_t step = 0;   // steps finished
  int64_t total = 0;  // steps planned (max tokens)
};

// Where the ranks compute.
enum class DeviceKind { Cpu, Cuda };

// The process group of rank threads. Auto: NCCL when the device is cuda and every rank can have a
// GPU of its own, else the local group (ranks sharing one device).
enum class GroupBackend { Auto, Local, Nccl };

// The names users type (--device, VLLM(device=...), the GUI), back and forth; an unknown name is
// an Error listing the names there are.
DeviceKind parseDeviceKind(std::string_view name);
GroupBackend parseGroupBackend(std::string_view name);
const char* toString(DeviceKind d);
const char* toString(GroupBackend b);

// A floating-point dtype a user names for a model ("bf16", "bfloat16", ...; see parseDType);
// "auto" or empty: none, the checkpoint's on cuda and float32 on the CPU.
std::optional<DType> parseModelDtype(const std::string& name);
// The short name parseModelDtype takes back ("bf16", "f16", "f32"); "auto" for none.
std::string modelDtypeName(const std::optional<DType>& dtype);

struct EngineOptions {
  std::string model;  // see ModelSource: "" = demo, path, HF name, random:CONFIG.json
  int tp = 1;
  // vLLM's pipeline_parallel_size: the decoder layers split into pp stages, each sharded tp
  // ways; tp x pp rank threads.
  int pp = 1;
  // vLLM's enable_expert_parallel: each rank holds num_experts / tp whole MoE experts instead of a
  // slice of every expert. No effect on dense models.
  bool expertParallel = false;
  // vLLM's decode_context_parallel_size (with VLLM_DCP_Q_REPLICATE=1): MLA models split their
  // latent KV cache along the tokens across groups of dcp ranks; dcp must divide tp.
  int dcp = 1;
  DeviceKind device = DeviceKind::Cpu;
  std::optional<DType> dtype;  // bf16, f16 or f32; none: f32 on the CPU, the checkpoint's on cuda
  GroupBackend backend = GroupBackend::Auto;
  // CPU threads a rank's forwards use; 0: one for a small model on the CPU, else cores / ranks
  // (intra_op_threads.h).
  int threadsPerRank = 0;
  // On the GPU, decode steps and small prefills replay CUDA graphs (off: vLLM's enforce_eager).
  bool cudaGraphs = true;
  // The collective watchdog: a collective (or a replayed graph of them) that waits longer fails
  // the job with an error naming it and what every rank was waiting on. 0: the default, 60 s, or
  // SHARDSCOPE_COLLECTIVE_TIMEOUT (seconds) when set.
  double collectiveTimeoutSeconds = 0;
  // Rank processes: set when this process runs one rank of `tp` (shardscope-engine, `run --mpi`);
  // the other ranks are processes running the same jobs. Unset: one rank thread per rank.
  std::shared_ptr<RankProcess> process;
  // Test hook, off by default: armed for the first job (SHARDSCOPE_INJECT_FAILURE=KIND:RANK:
  // LAYER:STEP arms it too); Engine::injectFailure arms it for a later job.
  FailureInjection failure;
};

// A port of the module tree as the UI and the CLI show it.
struct PortInfo {
  std::string name;       // "input" / "output"
  std::string shardKind;  // whole, column, fused, row, head, partial, vocab, dcp-group
};

struct ParameterInfo {
  std::string name;
  std::vector<int64_t> shardShape;  // a rank's piece (tensor-parallel rank 0 of its stage)
  std::vector<int64_t> fullShape;
};

struct ModuleInfo {
  std::string path;  // "model.model.layers[3].self_attn"
  std::string name;
  std::string kind;  // vLLM class name
  int depth = 0;
  int stage = 0;  // the pipeline stage holding it; -1: it spans stages (model, model.model)
  std::vector<PortInfo> ports;
  std::vector<ParameterInfo> parameters;
  int layer = -1;  // the decoder layer it is (or is inside); -1: outside the layers
};

struct ModelInfo {
  std::string spec;
  std::string path;  // the checkpoint directory (empty for random:)
  std::string family;
  std::string configSha256;
  std::string dtype;
  std::string device;
  std::string backend;  // process group: local, nccl, mpi or nccl+mpi (rank processes)
  std::vector<std::string> rankHosts;  // rank processes: the host of every rank; else empty
  int tp = 1;
  int pp = 1;  // pipeline stages
  // ATen/OpenBLAS threads of this process's first rank (intra_op_threads.h); 0 from a remote
  // engine older than the field.
  int intraOpThreads = 1;
  bool expertParallel = false;
  int dcp = 1;
  // The KV cache a token costs each rank, over the layers of its stage (all layers with one
  // stage; this process's first rank's stage otherwise) in the model's dtype (a latent under MLA,
  // split along the tokens under decode-context parallelism).
  double kvCacheBytesPerToken = 0;
  int64_t vocabSize = 0;
  int64_t numLayers = 0;
  int64_t numHeads = 0;
  int64_t numKvHeads = 0;
  int64_t headDim = 0;
  int64_t hiddenSize = 0;
  int64_t numExperts = 0;       // MoE experts per sparse layer (0: dense)
  int64_t expertsPerToken = 0;  // top-k of the MoE router
  std::vector<int64_t> eosTokenIds;
  std::vector<ModuleInfo> modules;  // depth-first, parents before children

  // Where each attention head lies in gathered qkv_proj and rotary_emb values.
  HeadLayout headLayout() const { return HeadLayout(numHeads, numKvHeads, headDim, tp); }
};

}  // namespace shardscope
