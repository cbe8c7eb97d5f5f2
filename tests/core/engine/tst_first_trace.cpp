// Issue 14's repro as a regression test: a process's *first* trace writes
// model.model.layers[1].mlp.output of a Qwen2.5-1.5B-shaped model at tp=2 over NCCL, bf16, CUDA
// graphs on. Each graph's capture once came after a single eager warm-up, and cuDNN's bf16
// prefill attention failed in the capture of the one-layer segment
// (CUDNN_STATUS_INTERNAL_ERROR_DEVICE_ALLOCATION_FAILED) on one rank, whose abort never reached
// the other: that one waited in its graph replay forever. The failure needs a cold process
// (nothing run on the GPU before), so this case lives alone in its executable, runs first, and
// must not be joined by other GPU cases. With SHARDSCOPE_GRAPH_WARMUPS=1 it fails (the cuDNN
// error, within the watchdog time); with the default warm-ups it passes and the graphs' logits
// equal eager's. GPU-only: skipped without SHARDSCOPE_TEST_DEVICE=cuda, NCCL and two GPUs.
#include <QtTest>

#include <filesystem>
#include <fstream>

#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/trace/script_runner.h"

using namespace shardscope;

namespace {

// Qwen2.5-1.5B's configuration (28 layers); the weights are random.
constexpr const char* kQwen25Config = R"({"architectures": ["Qwen2ForCausalLM"],
  "model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
  "num_hidden_layers": 28, "num_attention_heads": 12, "num_key_value_heads": 2,
  "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
  "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";

std::string repro(bool eager) {
  return std::string(
             "from nnsight.modeling.vllm import VLLM\n"
             "model = VLLM(\"Qwen/Qwen2.5-1.5B\", tensor_parallel_size=2, dispatch=True") +
         (eager ? ", enforce_eager=True" : "") +
         ")\n"
         "with model.trace(\"The mother tongue of Danielle Darrieux is\", temperature=0.0):\n"
         "    model.model.layers[1].mlp.output.zero_()\n"
         "    logits = model.logits.save()\n";
}

}  // namespace

class TestFirstTrace : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void firstTraceOfAProcessAtLayer1OverNccl() {
    if (test::device() != "cuda") QSKIP("CUDA graphs need the GPU (SHARDSCOPE_TEST_DEVICE=cuda)");
    if (test::backend() != "nccl") QSKIP("the repro runs over NCCL (SHARDSCOPE_TEST_BACKEND=nccl)");
    if (at::getNumGPUs() < 2) QSKIP("NCCL at tp=2 needs two GPUs");
    test::TempDir dir;
    std::ofstream(dir.path() / "config.json") << kQwen25Config;
    std::filesystem::copy_file(ensureDemoModel() / "tokenizer.json", dir.path() / "tokenizer.json");
    const auto logitsOf = [&](bool eager) {
      trace::RunOptions o;
      o.modelDirs["Qwen/Qwen2.5-1.5B"] = "random:" + (dir.path() / "config.json").string() + "@1";
      o.tp = 2;
      o.device = DeviceKind::Cuda;
      o.dtype = DType::BF16;
      o.backend = GroupBackend::Nccl;
      o.collectiveTimeoutSeconds = 20;  // this once hung forever
      o.out = [](const std::string&) {};
      o.note = [](const std::string&) {};
      trace::ScriptRunner runner(o);
      runner.run(repro(eager), "first_trace_layer1.py");
      return fromHostFloat(*runner.tensorValue("logits"));
    };
    const at::Tensor graphs = logitsOf(false);  // first: the process is cold
    const at::Tensor eager = logitsOf(true);
    QVERIFY2(test::closeToScale(graphs, eager, 2e-2),
             test::closeToScaleMessage(graphs, eager).c_str());
  }
};

QTEST_GUILESS_MAIN(TestFirstTrace)
#include "tst_first_trace.moc"
