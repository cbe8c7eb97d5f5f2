// GPU speed of the engine (issue 7): floors (device copy bandwidth, bf16 matmul rate), model
// load (first and warm), prefill latency, decode latency and throughput, and the same decode with
// a trace that reads o_proj.input of layer 10 every step or zeroes a head there every step.
// Prints one JSON object, with the model's config.json and the decode case's prompt length and
// steps so that bench/floors.py can compute the floors (the bytes a step streams, the FLOPs a
// prefill computes); bench/peers/hf_speed.py measures Hugging Face (sdpa and eager attention) on
// the same configuration and bench/report_gpu_speed.py prints both with ratios. --eager turns CUDA
// graphs off (the engine's own peer); --scaling measures only what the tensor-parallel scaling
// table needs (issue 8: prefill 2048, decode at batch 1, the cost of one gathered read and of
// one head write per step).
//
// --pp splits the layers into pipeline stages (tp x pp rank threads, one GPU each).
// --timeline DIR measures nothing: it records the kernels of a 16-step decode at batch 1, plain,
// with the read and with the head write (not with --timeline-decode-only), as Chrome traces in
// DIR (bench/report_timeline.py); --timeline-prefill N records a prefill of N tokens instead.
// --profile-decode N measures nothing either: it runs N decode steps at batch 1 between
// cudaProfilerStart and Stop, for Nsight Compute's --profile-from-start off (scripts/gpu/
// decode-profile): the profiler then replays only the decode's kernels, not the weights' making.
//
//   gpu_speed --model DIR [--steps 64] [--tp 1] [--pp 1] [--eager] [--scaling] > ours.json
#include <ATen/ATen.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "bench/kernel_timeline.h"
#include "core/engine/engine.h"
#include "core/model/layers/linear.h"
#include "core/trace/script_runner.h"

using namespace shardscope;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

double seconds(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Every GPU (the ranks of tp > 1 run on their own).
void deviceSync() {
  const c10::DeviceIndex current = c10::cuda::current_device();
  for (c10::DeviceIndex d = 0; d < c10::cuda::device_count(); ++d) {
    c10::cuda::set_device(d);
    c10::cuda::device_synchronize();
  }
  c10::cuda::set_device(current);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device-to-device copy of 4 GiB: bytes read plus bytes written over time.
double copyBandwidth() {
  const int64_t n = int64_t(1) << 31;  // bf16 elements: 4 GiB
  at::Tensor a = at::ones({n}, at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA));
  at::Tensor b = at::empty_like(a);
  b.copy_(a);
  deviceSync();
  std::vector<double> times;
  for (int i = 0; i < 10; ++i) {
    const auto t = Clock::now();
    b.copy_(a);
    deviceSync();
    times.push_back(seconds(t));
  }
  return 2.0 * double(n) * 2.0 / median(times);
}

double matmulRate() {
  const int64_t n = 8192;
  const auto o = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  at::Tensor a = at::randn({n, n}, o), b = at::randn({n, n}, o);
  at::Tensor c = at::matmul(a, b);
  deviceSync();
  std::vector<double> times;
  for (int i = 0; i < 10; ++i) {
    const auto t = Clock::now();
    for (int k = 0; k < 5; ++k) c = at::matmul(a, b);
    deviceSync();
    times.push_back(seconds(t) / 5);
  }
  return 2.0 * double(n) * double(n) * double(n) / median(times);
}

std::vector<int64_t> promptIds(int64_t n, int64_t vocab, uint64_t salt) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  uint64_t x = 0x9e3779b97f4a7c15ull * (salt + 1);
  for (auto& id : ids) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    id = int64_t((x >> 33) % uint64_t(vocab - 1000)) + 500;  // clear of special tokens
  }
  return ids;
}

// Wall time of one generation (prompts x maxTokens), median of `reps`; `last` gets the last
// one's result (its layers from CUDA graphs, its steps launched ahead).
double generateSeconds(Engine& e, const std::vector<std::vector<int64_t>>& prompts,
                       int64_t maxTokens, int reps, GenerateResult* last = nullptr) {
  GenerateRequest r;
  r.prompts = prompts;
  r.sampling.maxTokens = maxTokens;
  r.sampling.ignoreEos = true;
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    const auto t = Clock::now();
    GenerateResult result = Engine::generateResult(e.generate(r));
    times.push_back(seconds(t));
    if (last) *last = std::move(result);
  }
  return median(times);
}

std::string idList(const std::vector<int64_t>& ids) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i]);
  return s + "]";
}

double traceSeconds(Engine& e, const std::string& body, const std::vector<int64_t>& prompt,
                    int64_t maxTokens, int reps) {
  trace::RunOptions o;
  o.engine = &e;
  o.out = [](const std::string&) {};
  o.note = [](const std::string&) {};
  const std::string script = "model = VLLM(\"bench\")\nwith model.trace(" + idList(prompt) +
                             ", max_tokens=" + std::to_string(maxTokens) +
                             ", ignore_eos=True) as tracer:\n" + body;
  std::vector<double> times;
  for (int i = 0; i < reps; ++i) {
    trace::ScriptRunner runner(o);
    const auto t = Clock::now();
    runner.run(script, "bench.py");
    times.push_back(seconds(t));
  }
  return median(times);
}

// Traces at batch 1: plain, one read of layer 10's o_proj.input per step, one head zeroed.
std::map<std::string, std::string> traceBodies() {
  const std::string o = "model.model.layers[10].self_attn.o_proj";
  return {{"plain", "    pass\n"},
          {"read", "    xs = list().save()\n    for step in tracer.iter[:]:\n        xs.append(" +
                       o + ".input.clone())\n"},
          {"zero_head", "    for step in tracer.iter[:]:\n        z = " + o + ".input\n        " +
                            o + ".head(z, 0)[:] = 0\n"}};
}

// --timeline: 16 decode steps at batch 1 (after a 5-token prefill) plain and under each trace,
// each recorded after two unrecorded runs (graphs recorded, allocator warm).
void recordTimelines(Engine& e, const std::string& dir, bool decodeOnly, int64_t prefill) {
  constexpr int64_t kSteps = 16;
  const auto prompt = promptIds(5, e.info().vocabSize, 0);
  const auto record = [&](const std::string& name, const auto& work) {
    work();
    work();
    deviceSync();
    const std::string path = dir + "/" + name + ".json";
    bench::recordKernelTimeline(path, [&] {
      work();
      deviceSync();
    });
    std::fprintf(stderr, "timeline %s: %s\n", name.c_str(), path.c_str());
  };
  if (prefill > 0) {  // one step: the prompt's forward and its first token
    const auto prompt = promptIds(prefill, e.info().vocabSize, 1);
    record("prefill-" + std::to_string(prefill), [&] { generateSeconds(e, {prompt}, 1, 1); });
    return;
  }
  record("decode", [&] { generateSeconds(e, {prompt}, kSteps + 1, 1); });
  for (const auto& [name, body] : traceBodies()) {
    if (decodeOnly || name == "plain") continue;
    record("trace-" + name, [&] { traceSeconds(e, body, prompt, kSteps + 1, 1); });
  }
}

// --profile-decode: `steps` decode steps at batch 1 after a 5-token prompt inside the profiler's
// range, after two unprofiled runs (graphs recorded); the prompt's prefill runs before the range.
void profileDecode(Engine& e, int64_t steps) {
  const auto prompt = promptIds(5, e.info().vocabSize, 0);
  generateSeconds(e, {prompt}, steps + 1, 1);
  generateSeconds(e, {prompt}, steps + 1, 1);
  deviceSync();
  const auto check = [](cudaError_t r, const char* what) {
    if (r != cudaSuccess)
      throw std::runtime_error(
          std::string(what) + " failed: " + cudaGetErrorString(r) +
          " (run under ncu --profile-from-start off, or not under a profiler)");
  };
  check(cudaProfilerStart(), "cudaProfilerStart");
  generateSeconds(e, {prompt}, steps + 1, 1);
  deviceSync();
  check(cudaProfilerStop(), "cudaProfilerStop");
  std::fprintf(stderr, "profiled %lld decode steps\n", static_cast<long long>(steps));
}

// A decode step's matmuls alone at batch 1: each weight shape of layer 0 once per layer, then the
// LM head; LibTorch's matmul against `linearForward` (the GEMV kernel where it applies). One
// layer's weights serve every layer: at ~400 MB they leave the GPU's L2 between uses.
json decodeMatmuls(const ModelInfo& info, double bandwidth) {
  std::vector<std::vector<int64_t>> layerShapes;
  std::vector<int64_t> head;
  const std::string layer0 = "model.model.layers[0].";
  for (const auto& m : info.modules) {
    for (const auto& p : m.parameters) {
      if (p.name != "weight" || p.shardShape.size() != 2) continue;
      if (m.path.rfind(layer0, 0) == 0) layerShapes.push_back(p.shardShape);
      if (m.path == "model.lm_head") head = p.shardShape;
    }
  }
  const auto o = at::TensorOptions().dtype(at::kBFloat16).device(at::kCUDA);
  std::vector<at::Tensor> weights, inputs;
  int64_t bytes = 0;
  for (const auto& shape : layerShapes) {
    weights.push_back(at::randn(shape, o));
    inputs.push_back(at::randn({1, shape[1]}, o));
    bytes += 2 * shape[0] * shape[1] * info.numLayers;
  }
  at::Tensor headWeight = at::randn(head, o), headInput = at::randn({1, head[1]}, o);
  bytes += 2 * head[0] * head[1];
  const auto step = [&](bool kernel) {
    for (int64_t l = 0; l < info.numLayers; ++l) {
      for (size_t i = 0; i < weights.size(); ++i)
        kernel ? linearForward(inputs[i], weights[i]) : at::matmul(inputs[i], weights[i].t());
    }
    kernel ? linearForward(headInput, headWeight) : at::matmul(headInput, headWeight.t());
  };
  json out{{"weight_bytes", bytes}, {"floor_s", double(bytes) / bandwidth}};
  for (bool kernel : {false, true}) {
    step(kernel);
    deviceSync();
    std::vector<double> times;
    for (int r = 0; r < 10; ++r) {
      const auto t = Clock::now();
      step(kernel);
      deviceSync();
      times.push_back(seconds(t));
    }
    out[kernel ? "linear_s" : "matmul_s"] = median(times);
    std::fprintf(stderr, "decode matmuls alone, %s: %.3f ms (%.2fx the floor)\n",
                 kernel ? "linearForward (GEMV kernel)" : "LibTorch matmul", median(times) * 1e3,
                 median(times) / (double(bytes) / bandwidth));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model, timelineDir;
  int64_t steps = 64, timelinePrefill = 0, profileSteps = 0;
  int tp = 1;
  int pp = 1;
  bool eager = false, scaling = false, expertParallel = false, timelineDecodeOnly = false;
  std::vector<int64_t> batchList, prefillList;
  const auto parseList = [](const std::string& text) {
    std::vector<int64_t> v;
    std::stringstream list(text);
    for (std::string item; std::getline(list, item, ',');) v.push_back(std::stoll(item));
    return v;
  };
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--eager") eager = true;
    if (a == "--scaling") scaling = true;
    if (a == "--expert-parallel") expertParallel = true;
    if (a == "--timeline-decode-only") timelineDecodeOnly = true;
    if (i + 1 >= argc) continue;
    if (a == "--model") model = argv[i + 1];
    if (a == "--steps") steps = std::stoll(argv[i + 1]);
    if (a == "--tp") tp = std::stoi(argv[i + 1]);
    if (a == "--pp") pp = std::stoi(argv[i + 1]);
    if (a == "--batches") batchList = parseList(argv[i + 1]);
    if (a == "--prefills") prefillList = parseList(argv[i + 1]);
    if (a == "--timeline") timelineDir = argv[i + 1];
    if (a == "--timeline-prefill") timelinePrefill = std::stoll(argv[i + 1]);
    if (a == "--profile-decode") profileSteps = std::stoll(argv[i + 1]);
  }
  if (model.empty()) {
    std::fprintf(
        stderr,
        "usage: gpu_speed --model DIR|random:CONFIG.json@SEED [--steps 64] [--tp 1] [--pp 1] "
        "[--eager] [--scaling] [--expert-parallel] [--batches 1,16] [--prefills 2048] "
        "[--timeline DIR [--timeline-decode-only | --timeline-prefill N]] "
        "[--profile-decode STEPS]\n");
    return 2;
  }
  json out;
  out["bandwidth_bytes_per_s"] = copyBandwidth();
  out["matmul_flops_per_s"] = matmulRate();
  std::fprintf(stderr, "floors: %.0f GB/s, %.0f TFLOP/s\n",
               out["bandwidth_bytes_per_s"].get<double>() / 1e9,
               out["matmul_flops_per_s"].get<double>() / 1e12);

  // A checkpoint directory, or random:CONFIG.json@SEED (weights made in memory: no 60 GB file to
  // write for the MoE configuration).
  uint64_t checkpointBytes = 0;
  std::filesystem::path configPath;
  if (model.rfind("random:", 0) == 0) {
    const std::string spec = model.substr(7);
    configPath = spec.substr(0, spec.rfind('@'));
  } else {
    for (const auto& f : std::filesystem::directory_iterator(model)) {
      if (f.path().extension() == ".safetensors") checkpointBytes += f.file_size();
    }
    configPath = std::filesystem::path(model) / "config.json";
  }
  out["checkpoint_bytes"] = checkpointBytes;
  {
    std::ifstream config(configPath);
    const json parsed =
        config.is_open() ? json::parse(config, nullptr, /*allow_exceptions=*/false) : json();
    if (parsed.is_object()) out["config"] = parsed;
  }
  EngineOptions eo;
  eo.model = model;
  eo.device = DeviceKind::Cuda;
  eo.dtype = DType::BF16;
  eo.tp = tp;
  eo.pp = pp;
  eo.cudaGraphs = !eager;
  eo.expertParallel = expertParallel;
  out["expert_parallel"] = expertParallel;
  out["cuda_graphs"] = !eager;
  std::vector<double> loads;
  std::unique_ptr<Engine> engine;
  // A checkpoint is loaded twice (cold, then from the page cache); random weights once.
  const int loadRuns = model.rfind("random:", 0) == 0 ? 1 : 2;
  for (int i = 0; i < loadRuns; ++i) {
    engine.reset();
    const auto t = Clock::now();
    engine = std::make_unique<Engine>(eo);
    deviceSync();
    loads.push_back(seconds(t));
    std::fprintf(stderr, "load %d: %.2f s\n", i, loads.back());
  }
  out["load_first_s"] = loads[0];
  out["load_warm_s"] = loads.back();
  Engine& e = *engine;
  const ModelInfo& info = e.info();
  out["tp"] = tp;
  out["pp"] = pp;
  int64_t weightBytes = 0, embeddingElements = 0;
  for (const auto& m : info.modules) {
    for (const auto& p : m.parameters) {
      int64_t n = 1;
      for (int64_t s : p.fullShape) n *= s;
      weightBytes += 2 * n;
      if (m.path == "model.model.embed_tokens") embeddingElements += n;
    }
  }
  out["weight_bytes"] = weightBytes;
  // Before issue 15 the reports' floors were built from these two: every parameter's bytes for a
  // decode step, and these parameters (the LM head included) times every prompt row for a
  // prefill. bench/floors.py now counts what a step reads and computes, from "config".
  out["matmul_params"] = (weightBytes / 2) - embeddingElements;
  out["layers"] = info.numLayers;
  out["hidden"] = info.hiddenSize;

  if (!timelineDir.empty()) {
    std::filesystem::create_directories(timelineDir);
    recordTimelines(e, timelineDir, timelineDecodeOnly, timelinePrefill);
    return 0;
  }
  if (profileSteps > 0) {
    profileDecode(e, profileSteps);
    return 0;
  }
  if (!scaling && tp == 1)
    out["decode_matmuls"] = decodeMatmuls(info, out["bandwidth_bytes_per_s"].get<double>());

  // Warm up kernels and allocator (a prompt length not measured below: its graphs are its own).
  generateSeconds(e, {promptIds(100, info.vocabSize, 99)}, 4, 2);

  std::vector<int64_t> prefills =
      scaling ? std::vector<int64_t>{2048} : std::vector<int64_t>{5, 128, 2048};
  if (!prefillList.empty()) prefills = prefillList;
  constexpr int64_t kDecodePromptTokens = 5;
  out["decode_prompt_tokens"] = kDecodePromptTokens;
  out["steps"] = steps;
  std::vector<int64_t> batches =
      scaling ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 16, 64};
  if (!batchList.empty()) batches = batchList;
  for (int64_t n : prefills) {
    // The first prefill of a length records its graphs (up to 256 tokens); later ones replay.
    const auto prompt = promptIds(n, info.vocabSize, uint64_t(n));
    const double first = generateSeconds(e, {prompt}, 1, 1);
    const double s = generateSeconds(e, {prompt}, 1, 5);
    out["prefill_s"][std::to_string(n)] = s;
    out["prefill_first_s"][std::to_string(n)] = first;
    std::fprintf(stderr, "prefill %lld: %.2f ms (first of its length %.2f ms)\n", (long long)n,
                 s * 1e3, first * 1e3);
  }
  for (int64_t batch : batches) {
    std::vector<std::vector<int64_t>> prompts;
    for (int64_t b = 0; b < batch; ++b)
      prompts.push_back(promptIds(kDecodePromptTokens, info.vocabSize, uint64_t(b)));
    const double prefill = generateSeconds(e, prompts, 1, 3);
    GenerateResult last;
    const double total = generateSeconds(e, prompts, steps + 1, 3, &last);
    const double perStep = (total - prefill) / double(steps);
    out["decode"][std::to_string(batch)] = {{"per_step_s", perStep},
                                            {"tokens_per_s", double(batch) / perStep},
                                            {"graph_layers", last.graphLayers},
                                            {"ahead_steps", last.aheadSteps}};
    std::fprintf(stderr,
                 "decode batch %lld: %.2f ms/step, %.0f tok/s (%lld layers from graphs, %lld "
                 "steps launched ahead)\n",
                 (long long)batch, perStep * 1e3, double(batch) / perStep,
                 (long long)last.graphLayers, (long long)last.aheadSteps);
  }
  const auto prompt = promptIds(5, info.vocabSize, 0);
  for (const auto& [name, body] : traceBodies()) {
    const double prefill = traceSeconds(e, body, prompt, 1, 3);
    const double total = traceSeconds(e, body, prompt, steps + 1, 3);
    out["trace"][name] = {{"total_s", total}, {"per_step_s", (total - prefill) / double(steps)}};
    std::fprintf(stderr, "trace %s: %.2f ms/step (total %.1f ms)\n", name.c_str(),
                 (total - prefill) / double(steps) * 1e3, total * 1e3);
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}
