// interp_units (issue 15, target 4): the cost of interpretability units against a plain forward,
// on a random checkpoint (default: Qwen2.5-1.5B's shape, bench/configs/qwen2.5-1.5b.json) and a
// 9-token CounterFact-style prompt, at any tp. Each unit is a trace script run through the same
// engine; per unit 3 warm-ups, then the median of 7 runs, each ended by a device synchronize.
//   forward           engine job, 1 token, no trace (what the single-forward units are compared to)
//   empty_trace       `with model.trace(p): pass`
//   read_logits       the step's logits saved: an observed forward that waits on no layer's port
//   logit_lens        every layer: logits_processor(lm_head, norm(residual stream)), the top token
//                     of the last position kept (the nnsight way: one call per layer)
//   steer             a scaled direction added to layers[L/2].output at every position
//   generate          engine job, 8 greedy tokens, no trace (what steer_every_step is compared to)
//   steer_every_step  the same steering at every step of the 8-token generation
//   patch             layers[3L/4].output copied from a clean invoke into a corrupted one
//   zero_mlp          layers[1].mlp.output set to 0
// bench/peers/hf_interp_units.py runs the same units with Hugging Face hooks; scripts/gpu/
// interp-units runs both in one call and bench/report_interp_units.py prints them as one table.
// --check also verifies, outside the timed runs, that the units do their work (the lens's last
// layer predicts the model's own top token; the patched invoke's logits equal the clean ones).
// --timeline DIR (CUDA builds) also records one more run of each unit's kernels as a Chrome trace
// DIR/UNIT.json (bench/report_timeline.py --forwards 1: how long the GPU idled waiting on the
// host; --timeline-host also records the host's ATen ops and the unit's span). --only a,b runs
// those units and the baselines they are divided by; --baselines-last runs the baselines after
// them (the process's first CUDA graphs are then recorded inside traces). --unit NAME=FILE adds a
// unit whose trace script is FILE's text, divided by the plain forward (a probe: which trace puts
// the process in a state, scripts/gpu/graph-state-probes). --no-cudnn-attention keeps SDPA off
// cuDNN (CUDA builds).
//
//   interp_units [--model SPEC] [--device cpu|cuda] [--tp N] [--backend auto|local|nccl]
//                [--dtype bf16] [--runs 7] [--warmup 3] [--check] [--timeline DIR]
//                [--timeline-host] [--baselines-last] [--only UNIT,...] [--unit NAME=FILE]...
//                [--no-cudnn-attention]
//                > ours.json
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/engine/engine.h"
#include "core/error.h"
#include "core/file_tree.h"
#include "core/trace/script_runner.h"
#ifdef SHARDSCOPE_BENCH_CUDA
#include <ATen/Context.h>
#include <c10/cuda/CUDAFunctions.h>

#include "bench/kernel_timeline.h"
#endif

using namespace shardscope;
using Clock = std::chrono::steady_clock;
using nlohmann::json;

namespace {

// "The Eiffel Tower is located in the city of" / "The Colosseum is located in the city of": ids of
// the Qwen2.5 tokenizer's shape (9 tokens, the subject differs), reduced modulo the vocabulary.
const std::vector<int64_t> kClean = {785, 468, 3092, 301, 21938, 374, 7407, 304, 279};
const std::vector<int64_t> kCorrupt = {785, 4254, 9267, 2142, 372, 374, 7407, 304, 279};
constexpr int64_t kSteps = 8;

struct Options {
  std::string model;
  std::string device = "cpu", backend, dtype = "bf16", timelineDir;
  std::set<std::string> only;  // --only: these units and their baselines; empty: every unit
  int tp = 1, runs = 7, warmup = 3;
  bool check = false, timelineHost = false, baselinesLast = false, noCudnnAttention = false;
  std::vector<std::pair<std::string, std::string>> extraUnits;  // --unit: name, script
};

void deviceSync(const std::string& device) {
#ifdef SHARDSCOPE_BENCH_CUDA
  if (device != "cuda") return;
  const int current = c10::cuda::current_device();
  for (int d = 0; d < int(c10::cuda::device_count()); ++d) {
    c10::cuda::set_device(d);
    c10::cuda::device_synchronize();
  }
  c10::cuda::set_device(current);
#else
  if (device == "cuda")
    throw Error("interp_units was built without CUDA; rebuild with LibTorch's CUDA");
#endif
}

// One more run of `once`, its kernels recorded to `path` (CUDA builds only).
template <typename Work>
void recordTimeline(const Options& opt, const std::string& path, Work&& once) {
#ifdef SHARDSCOPE_BENCH_CUDA
  deviceSync(opt.device);
  bench::recordKernelTimeline(
      path,
      [&] {
        once();
        deviceSync(opt.device);
      },
      opt.timelineHost);
  std::fprintf(stderr, "timeline: %s\n", path.c_str());
#else
  (void)once;
  throw Error("--timeline needs a CUDA build (LibTorch's Kineto profiler records the kernels); " +
              path + " was not written");
#endif
}

std::string idList(const std::vector<int64_t>& ids, int64_t vocab) {
  std::string s = "[";
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? ", " : "") + std::to_string(ids[i] % vocab);
  return s + "]";
}

std::set<std::string> unitList(const std::string& text) {
  std::set<std::string> names;
  std::stringstream list(text);
  for (std::string name; std::getline(list, name, ',');) names.insert(name);
  return names;
}

// --unit NAME=FILE: the unit's name and the script read from FILE.
std::pair<std::string, std::string> extraUnit(const std::string& spec) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0)
    throw Error("--unit " + spec + ": expected NAME=FILE (FILE holds the unit's trace script)");
  try {
    return {spec.substr(0, eq), readFile(spec.substr(eq + 1))};
  } catch (const Error& e) {
    throw Error("--unit " + spec + ": " + e.what());
  }
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool* flag = a == "--check"                ? &o.check
                 : a == "--timeline-host"      ? &o.timelineHost
                 : a == "--baselines-last"     ? &o.baselinesLast
                 : a == "--no-cudnn-attention" ? &o.noCudnnAttention
                                               : nullptr;
    if (flag) {
      *flag = true;
      continue;
    }
    if (i + 1 >= argc)
      throw Error("option " + a + " needs a value (see the header of interp_units.cpp)");
    const std::string v = argv[++i];
    if (a == "--model")
      o.model = v;
    else if (a == "--device")
      o.device = v;
    else if (a == "--tp")
      o.tp = std::stoi(v);
    else if (a == "--backend")
      o.backend = v;
    else if (a == "--dtype")
      o.dtype = v;
    else if (a == "--runs")
      o.runs = std::stoi(v);
    else if (a == "--warmup")
      o.warmup = std::stoi(v);
    else if (a == "--timeline")
      o.timelineDir = v;
    else if (a == "--only")
      o.only = unitList(v);
    else if (a == "--unit")
      o.extraUnits.push_back(extraUnit(v));
    else
      throw Error("unknown option " + a +
                  "; accepted: --model --device --tp --backend --dtype --runs --warmup --check "
                  "--timeline --timeline-host --baselines-last --only --unit --no-cudnn-attention");
  }
  if (o.runs < 1 || o.warmup < 0) throw Error("--runs must be at least 1 and --warmup at least 0");
  if (o.model.empty())
    o.model = std::string("random:") + SHARDSCOPE_SOURCE_DIR "/bench/configs/qwen2.5-1.5b.json@1";
  return o;
}

struct Unit {
  std::string name;
  std::string body;      // a trace script, or empty for an engine job without a trace
  int64_t tokens = 1;    // tokens generated
  std::string baseline;  // the unit its ratio is taken to
};

// The units' scripts for a model of `layers` layers and hidden size `hidden`.
std::vector<Unit> builtInUnits(int64_t layers, int64_t hidden, int64_t vocab) {
  const std::string clean = idList(kClean, vocab), corrupt = idList(kCorrupt, vocab);
  const std::string steerAt = std::to_string(layers / 2), patchAt = std::to_string(3 * layers / 4);
  const std::string head = "model = VLLM(\"bench\")\n";
  const std::string direction = "d = torch.ones(" + std::to_string(hidden) + ") * 0.5\n";
  const std::string oneStep = "with model.trace(" + clean + "):\n";
  return {
      {"forward", "", 1, ""},
      {"empty_trace", head + oneStep + "    pass\n", 1, "forward"},
      {"read_logits", head + oneStep + "    logits = model.logits.save()\n", 1, "forward"},
      {"logit_lens",
       head + oneStep + "    tops = []\n    for i in range(" + std::to_string(layers) +
           "):\n"
           "        o = model.model.layers[i].output\n"  // (hidden, residual), as in vLLM
           "        logits = model.logits_processor(model.lm_head, model.model.norm(o[0] + o[1]))\n"
           "        tops.append(logits[-1].argmax())\n"
           "    lens = torch.stack(tops).save()\n"
           "    top = model.logits.argmax(-1).save()\n",
       1, "forward"},
      {"steer",
       head + direction + oneStep + "    model.model.layers[" + steerAt + "].output[0] += d\n", 1,
       "forward"},
      {"generate", "", kSteps, ""},
      {"steer_every_step",
       head + direction + "with model.trace(" + clean + ", max_tokens=" + std::to_string(kSteps) +
           ", ignore_eos=True) as tracer:\n    for step in tracer.iter[:]:\n        "
           "model.model.layers[" +
           steerAt + "].output[0] += d\n",
       kSteps, "generate"},
      {"patch",
       head + "with model.trace() as tracer:\n    with tracer.invoke(" + clean +
           "):\n        a = model.model.layers[" + patchAt +
           "].output[0].clone()\n"
           "        b = model.model.layers[" +
           patchAt +
           "].output[1].clone()\n"
           "        cleanLogits = model.logits.save()\n"
           "    with tracer.invoke(" +
           corrupt + "):\n        o = model.model.layers[" + patchAt +
           "].output\n"  // wait at the port, then write the clean values into it
           "        o[0][:] = a\n        o[1][:] = b\n        patched = model.logits.save()\n",
       1, "forward"},
      {"zero_mlp", head + oneStep + "    model.model.layers[1].mlp.output[:] = 0\n", 1, "forward"},
  };
}

// The built-in units, then those --unit added.
std::vector<Unit> units(const Options& opt, const ModelInfo& info) {
  std::vector<Unit> all = builtInUnits(info.numLayers, info.hiddenSize, info.vocabSize);
  for (const auto& [name, script] : opt.extraUnits) {
    for (const Unit& u : all) {
      if (u.name == name) throw Error("--unit " + name + ": a unit of that name exists");
    }
    all.push_back({name, script, 1, "forward"});
  }
  return all;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// What --check verifies after one run of each unit.
void checkUnit(const std::string& name, const trace::ScriptRunner& runner, int64_t layers) {
  if (name == "logit_lens") {
    const auto lens = runner.tensorValue("lens"), top = runner.tensorValue("top");
    if (!lens || !top || lens->numel() != layers || top->numel() != 1)
      throw Error("logit_lens did not keep one top token per layer and the model's own");
    // The last layer's lens is the model's own head: it predicts the same token.
    if (lens->element(layers - 1) != top->element(0))
      throw Error("logit_lens: the last layer predicts token " +
                  std::to_string(lens->element(layers - 1)) + ", the model " +
                  std::to_string(top->element(0)));
  }
  if (name == "patch") {
    const auto a = runner.tensorValue("cleanLogits"), b = runner.tensorValue("patched");
    if (!a || !b) throw Error("patch saved no logits");
    const auto x = a->toFloats(), y = b->toFloats();
    if (x.size() != y.size()) throw Error("patch: the clean and patched logits differ in shape");
    double scale = 0, diff = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      scale = std::max(scale, double(std::fabs(x[i])));
      diff = std::max(diff, double(std::fabs(x[i] - y[i])));
    }
    // Patching the whole residual stream makes the corrupted row compute what the clean one did.
    if (diff > 0.05 * scale)
      throw Error("patch: the patched logits differ from the clean ones by " +
                  std::to_string(diff) + " (scale " + std::to_string(scale) + ")");
  }
}

}  // namespace

int main(int argc, char** argv) try {
  const Options opt = parse(argc, argv);
  if (!opt.timelineDir.empty()) std::filesystem::create_directories(opt.timelineDir);
  if (opt.noCudnnAttention) {
#ifdef SHARDSCOPE_BENCH_CUDA
    at::globalContext().setSDPUseCuDNN(false);  // SDPA then picks flash or memory-efficient
#else
    throw Error("--no-cudnn-attention needs a CUDA build");
#endif
  }
  EngineOptions eo;
  eo.model = opt.model;
  eo.device = parseDeviceKind(opt.device);
  eo.dtype = parseModelDtype(opt.dtype);
  eo.tp = opt.tp;
  if (!opt.backend.empty()) eo.backend = parseGroupBackend(opt.backend);
  Engine engine(eo);
  const ModelInfo& info = engine.info();
  if (info.numLayers < 4) throw Error("interp_units needs a model of at least 4 layers");

  trace::RunOptions ro;
  ro.engine = &engine;
  ro.out = [](const std::string&) {};
  ro.note = [](const std::string&) {};
  trace::ScriptRunner runner(ro);
  json out{{"model", opt.model},
           {"device", opt.device},
           {"tp", opt.tp},
           {"dtype", info.dtype},
           {"backend", info.backend},
           {"layers", info.numLayers},
           {"hidden", info.hiddenSize},
           {"prompt_tokens", kClean.size()},
           {"steps", kSteps},
           {"runs", opt.runs},
           {"warmup", opt.warmup}};
  std::map<std::string, double> seconds;
  std::set<std::string> wanted = opt.only;  // a unit's baseline runs with it
  const std::vector<Unit> all = units(opt, info);
  for (const Unit& u : all) {
    if (opt.only.count(u.name) && !u.baseline.empty()) wanted.insert(u.baseline);
  }
  std::vector<Unit> order;
  for (const Unit& u : all) {
    if (opt.only.empty() || wanted.count(u.name)) order.push_back(u);
  }
  if (opt.baselinesLast) {  // the engine's first graphs are then recorded by traced units
    std::stable_partition(order.begin(), order.end(),
                          [](const Unit& u) { return !u.baseline.empty(); });
  }
  for (const Unit& u : order) {
    GenerateRequest plain;
    plain.prompts = {std::vector<int64_t>()};
    for (int64_t id : kClean) plain.prompts[0].push_back(id % info.vocabSize);
    plain.sampling.maxTokens = u.tokens;
    plain.sampling.ignoreEos = true;
    const auto once = [&] {
      if (u.body.empty()) {
        Engine::generateResult(engine.generate(plain));
      } else {
        runner.run(u.body, u.name + ".py");
      }
    };
    for (int i = 0; i < opt.warmup; ++i) once();
    if (opt.check) checkUnit(u.name, runner, info.numLayers);
    std::vector<double> times;
    for (int i = 0; i < opt.runs; ++i) {
      deviceSync(opt.device);
      const auto t = Clock::now();
      once();
      deviceSync(opt.device);
      times.push_back(std::chrono::duration<double>(Clock::now() - t).count());
    }
    seconds[u.name] = median(times);
    if (!opt.timelineDir.empty())
      recordTimeline(opt, opt.timelineDir + "/" + u.name + ".json", once);
    json row{{"seconds", seconds[u.name]}, {"tokens", u.tokens}};
    if (!u.baseline.empty()) row["baseline"] = u.baseline;
    out["units"][u.name] = row;
  }
  for (const Unit& u : order) {
    if (u.baseline.empty()) {
      std::fprintf(stderr, "%-17s %9.3f ms\n", u.name.c_str(), seconds[u.name] * 1e3);
    } else {
      std::fprintf(stderr, "%-17s %9.3f ms (%.2fx %s)\n", u.name.c_str(), seconds[u.name] * 1e3,
                   seconds[u.name] / seconds[u.baseline], u.baseline.c_str());
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "interp_units: %s\n", e.what());
  return 1;
}
