// A model of Qwen3-8B's widths (hidden 4096, 32 query heads, 8 KV heads, head_dim 128, vocab
// 151936; two layers and a small intermediate size) from the random source: at tp=2 every rank
// holds vLLM's shard shapes, and tp=2 logits equal tp=1 logits within fp32 tolerance.
#include <QtTest>

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>

#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/host_tensor_conversion.h"

using namespace shardscope;

namespace {

constexpr const char* kConfig = R"({"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
  "vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 256, "num_hidden_layers": 2,
  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 4096,
  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16"})";

const ParameterInfo* findParameter(const ModelInfo& info, const std::string& module,
                                   const std::string& name) {
  for (const auto& m : info.modules) {
    if (m.path != module) continue;
    for (const auto& p : m.parameters) {
      if (p.name == name) return &p;
    }
  }
  return nullptr;
}

struct Run {
  std::vector<int64_t> ids;
  at::Tensor logits;
};

Run generate(Engine& engine) {
  GenerateRequest r;
  r.prompts = {{785, 6722, 315, 9625, 374}};
  r.sampling.maxTokens = 3;
  r.sampling.ignoreEos = true;
  r.returnLogits = true;
  const auto result = Engine::generateResult(engine.generate(r));
  return {result.outputs[0].tokenIds, fromHostFloat(result.outputs[0].logits)};
}

}  // namespace

class TestQwen3_8bWidths : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void shardShapesAndLogitsMatchTp1() {
    test::TempDir dir;
    std::ofstream(dir.path() / "config.json") << kConfig;
    EngineOptions o;
    o.model = "random:" + (dir.path() / "config.json").string() + "@7";
    o.device = test::deviceKind();
    o.dtype = DType::F32;
    o.backend = GroupBackend::Local;

    Run tp1;
    {
      Engine engine(o);
      tp1 = generate(engine);
    }
    o.tp = 2;
    Engine engine(o);
    const ModelInfo& info = engine.info();
    const auto* oProj = findParameter(info, "model.model.layers[0].self_attn.o_proj", "weight");
    const auto* lmHead = findParameter(info, "model.lm_head", "weight");
    const auto* qkv = findParameter(info, "model.model.layers[0].self_attn.qkv_proj", "weight");
    QVERIFY(oProj && lmHead && qkv);
    QCOMPARE(oProj->shardShape, (std::vector<int64_t>{4096, 2048}));
    QCOMPARE(lmHead->shardShape, (std::vector<int64_t>{75968, 4096}));
    QCOMPARE(qkv->shardShape, (std::vector<int64_t>{3072, 4096}));  // 16 q + 4 k + 4 v heads
    const Run tp2 = generate(engine);
    QCOMPARE(tp2.ids, tp1.ids);
    const double err = test::maxRelativeError(tp2.logits, tp1.logits);
    qInfo("tp=2 vs tp=1 logits: max relative error %.2e", err);
    QVERIFY2(err < 1e-5, std::to_string(err).c_str());
  }
};

QTEST_GUILESS_MAIN(TestQwen3_8bWidths)
#include "tst_qwen3_8b_widths.moc"
