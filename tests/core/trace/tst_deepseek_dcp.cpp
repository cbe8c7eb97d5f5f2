// The seed's decode-context-parallel sentence on DeepSeek-V2-Lite widths (tests/trace/
// deepseek-v2-lite-widths.json: hidden 2048, 16 heads, kv_lora_rank 512, qk 128 + 64, v 128, YaRN;
// two layers, the second MoE with 16 routed and 2 shared experts to keep the CPU run small; random
// weights, the Qwen3 tokenizer). resources/examples/seed_6_dcp.py at tp=4, dcp=2 against tp=1:
// the widths of q_proj.output, kv_b_proj.output, o_proj.input and the MoE output are tp=1's and
// so are their values; zeroing one head of o_proj.input over 8 steps gives tp=1's tokens; every
// rank's q_proj is DCPGroupColumnParallelLinear; the KV cache a token costs a rank halves at
// dcp=2; dcp that does not divide tp is refused with the combinations that work.
#include <QtTest>

#include <ATen/ATen.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "common/random_model.h"
#include "common/script_run.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/engine/rank_context.h"

using namespace shardscope;

namespace {

const char* kModelName = "deepseek-ai/DeepSeek-V2-Lite";

std::string readText(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `source` with the test model at tp / dcp (0: as the script says).
test::ScriptRun runScript(const std::string& spec, const std::string& source, int tp, int dcp) {
  test::ScriptRun run;
  trace::RunOptions o;
  o.modelDirs[kModelName] = spec;
  o.tp = tp;
  o.dcp = dcp;
  o.device = test::deviceKind();
  o.dtype = DType::F32;
  o.backend = test::groupBackend();
  o.out = run.printTo();
  run.runner = std::make_unique<trace::ScriptRunner>(o);
  run.runner->run(source, "seed_6_dcp.py");
  return run;
}

// seed_6_dcp.py's intervention: head 5 of layer 1's o_proj input zeroed at every step (or not,
// for the baseline); the last step's logits are saved.
std::string zeroHeadScript(bool zero) {
  return std::string(R"(from nnsight.modeling.vllm import VLLM
model = VLLM("deepseek-ai/DeepSeek-V2-Lite", tensor_parallel_size=4, decode_context_parallel_size=2)
with model.trace("The capital of France is", temperature=0.0, max_tokens=8) as tracer:
    for _ in tracer.iter[:8]:
)") +
         (zero ? "        model.model.layers[1].self_attn.o_proj.input[:, 5 * 128:6 * 128] = 0\n"
               : "") +
         R"(        logits = model.logits.save()
    out = tracer.result.save()
print(out.outputs[0].token_ids)
)";
}

}  // namespace

class TestDeepseekDcp : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    spec_ = test::randomModelSpec(dir_.path(), "deepseek-v2-lite-widths.json", 3);
    script_ = readText(test::sourceDir() / "resources/examples/seed_6_dcp.py");
  }

  // Whole widths and tp=1's values at tp=4, dcp=2.
  void seedValuesEqualTp1() {
    const test::ScriptRun one = runScript(spec_, script_, 1, 1);
    const test::ScriptRun four = runScript(spec_, script_, 0, 0);  // the script's tp=4, dcp=2
    QCOMPARE(QString::fromStdString(four.lines.back()), QString::fromStdString(one.lines.back()));
    QVERIFY2(one.lines.back().find("torch.Size([5, 3072]) torch.Size([5, 4096]) "
                                   "torch.Size([5, 2048]) torch.Size([5, 2048])") == 0,
             one.lines.back().c_str());
    for (const char* name : {"q", "kv", "z", "moe"}) {
      const at::Tensor ref = one.tensor(name), got = four.tensor(name);
      QCOMPARE(got.sizes().vec(), ref.sizes().vec());
      QVERIFY2(test::closeToScale(got, ref),
               (std::string(name) + ": " + test::closeToScaleMessage(got, ref)).c_str());
    }
  }

  // An intervention through o_proj.input steers tp=4, dcp=2 exactly as it steers tp=1.
  void zeroedHeadGivesTp1Tokens() {
    const test::ScriptRun one = runScript(spec_, zeroHeadScript(true), 1, 1);
    const test::ScriptRun four = runScript(spec_, zeroHeadScript(true), 0, 0);
    const test::ScriptRun baseline = runScript(spec_, zeroHeadScript(false), 1, 1);
    const auto ids = test::idList(one.lines.back());
    QCOMPARE(int(ids.size()), 8);
    QCOMPARE(test::idList(four.lines.back()), ids);
    const at::Tensor zeroed = one.tensor("logits"), plain = baseline.tensor("logits");
    QVERIFY2(!test::closeToScale(zeroed, plain), "zeroing the head changed nothing");
    QVERIFY2(test::closeToScale(four.tensor("logits"), zeroed),
             test::closeToScaleMessage(four.tensor("logits"), zeroed).c_str());
  }

  // Every rank builds q_proj as the group-sharded layer; kv_b_proj and o_proj stay tp-sharded.
  void everyRankBuildsTheGroupShardedQProj() {
    Engine engine(options(4, 2));
    std::mutex m;
    std::vector<std::string> kinds(4);
    engine
        .submit([&](RankContext& ctx) {
          const auto& modules = ctx.model.modulesByPath();
          const std::string q = modules.at("model.model.layers[1].self_attn.q_proj")->kind();
          std::lock_guard lock(m);
          kinds[size_t(ctx.rank)] = q;
        })
        .wait();
    for (const std::string& k : kinds)
      QCOMPARE(QString::fromStdString(k), QString("DCPGroupColumnParallelLinear"));
    for (const ModuleInfo& mi : engine.info().modules) {
      if (mi.path == "model.model.layers[1].self_attn.q_proj") {
        QCOMPARE(QString::fromStdString(mi.ports[1].shardKind), QString("dcp-group"));
      }
    }
  }

  // The latent cache per token and rank: (512 + 64) values per layer; dcp=2 halves it.
  void kvBytesHalveAtDcp2() {
    Engine one(options(4, 1));
    const double bytes1 = one.info().kvCacheBytesPerToken;
    QCOMPARE(bytes1, double(2 * (512 + 64) * 4));
    Engine two(options(4, 2));
    QCOMPARE(two.info().kvCacheBytesPerToken, bytes1 / 2);
  }

  // dcp must divide tp; the error lists the combinations that work.
  void refusesDcpThatDoesNotDivideTp() {
    try {
      Engine engine(options(2, 4));
      QFAIL("tp=2 dcp=4 was accepted");
    } catch (const Error& e) {
      const QString what = QString::fromUtf8(e.what());
      QVERIFY2(what.contains("does not divide tensor_parallel_size 2") &&
                   what.contains("tp=4 dcp=1|2|4"),
               qPrintable(what));
    }
  }

 private:
  EngineOptions options(int tp, int dcp) const {
    EngineOptions o;
    o.model = spec_;
    o.tp = tp;
    o.dcp = dcp;
    o.device = test::deviceKind();
    o.dtype = DType::F32;
    o.backend = test::groupBackend();
    return o;
  }

  test::TempDir dir_;
  std::string spec_, script_;
};

QTEST_GUILESS_MAIN(TestDeepseekDcp)
#include "tst_deepseek_dcp.moc"
