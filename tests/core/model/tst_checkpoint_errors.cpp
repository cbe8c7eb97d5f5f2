// Bad checkpoints reach the user as one error naming the file, the tensor and what was expected;
// never a crash. Each case corrupts a copy of the qwen3-tiny golden checkpoint and opens it with
// the engine, as the CLI would.
#include <QtTest>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_support.h"
#include "core/engine/engine.h"
#include "core/error.h"
#include "core/model/model_config.h"
#include "core/model/safetensors_file.h"

using namespace shardscope;

namespace {

std::filesystem::path copyModel(const test::TempDir& dir, const std::string& name = "qwen3-tiny") {
  const auto dst = dir.path() / name;
  std::filesystem::copy(test::goldenModel(name), dst, std::filesystem::copy_options::recursive);
  std::filesystem::remove(dst / "golden.safetensors");
  return dst;
}

std::vector<std::pair<std::string, at::Tensor>> readAll(const std::filesystem::path& file) {
  SafetensorsFile f(file);
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& [name, e] : f.entries()) out.emplace_back(name, f.view(e).clone());
  return out;
}

std::string engineError(const std::filesystem::path& dir, int tp = 1) {
  try {
    EngineOptions o;
    o.model = dir.string();
    o.tp = tp;
    Engine engine(o);
  } catch (const CheckpointError& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("wrong exception type: ") + e.what();
  }
  return "no error";
}

void editConfig(const std::filesystem::path& dir,
                const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j;
  std::ifstream(dir / "config.json") >> j;
  edit(j);
  std::ofstream(dir / "config.json") << j.dump(2);
}

#define QVERIFY_CONTAINS(haystack, needle)               \
  QVERIFY2((haystack).find(needle) != std::string::npos, \
           (std::string("'") + (needle) + "' not in: " + (haystack)).c_str())

}  // namespace

class TestCheckpointErrors : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void goodCheckpointLoads() {
    QCOMPARE(engineError(test::goldenModel("qwen3-tiny")), std::string("no error"));
  }

  void truncatedFile() {
    test::TempDir tmp;
    const auto dir = copyModel(tmp);
    const auto file = dir / "model.safetensors";
    std::filesystem::resize_file(file, std::filesystem::file_size(file) / 2);
    const std::string e = engineError(dir);
    QVERIFY_CONTAINS(e, file.string());
    QVERIFY_CONTAINS(e, "truncated");
  }

  void missingTensor() {
    test::TempDir tmp;
    const auto dir = copyModel(tmp);
    auto tensors = readAll(dir / "model.safetensors");
    std::erase_if(tensors,
                  [](const auto& p) { return p.first == "model.layers.1.mlp.down_proj.weight"; });
    writeSafetensors(dir / "model.safetensors", tensors);
    const std::string e = engineError(dir);
    QVERIFY_CONTAINS(e, "missing tensor 'model.layers.1.mlp.down_proj.weight'");
    QVERIFY_CONTAINS(e, "(64, 128)");
  }

  void unexpectedTensor() {
    test::TempDir tmp;
    const auto dir = copyModel(tmp);
    auto tensors = readAll(dir / "model.safetensors");
    tensors.emplace_back("model.layers.0.extra.weight", at::zeros({2}));
    writeSafetensors(dir / "model.safetensors", tensors);
    const std::string e = engineError(dir);
    QVERIFY_CONTAINS(e, "unexpected tensor 'model.layers.0.extra.weight'");
    QVERIFY_CONTAINS(e, (dir / "model.safetensors").string());
  }

  void shapeDisagreesWithConfig() {
    test::TempDir tmp;
    const auto dir = copyModel(tmp);
    editConfig(dir, [](nlohmann::json& j) { j["intermediate_size"] = 96; });
    const std::string e = engineError(dir);
    QVERIFY_CONTAINS(e, "model.layers.0.mlp.gate_proj.weight");
    QVERIFY_CONTAINS(e, "shape (128, 64) but config.json implies (96, 64)");
  }

  void unknownDtypeInAShardedCheckpoint() {
    test::TempDir tmp;
    const auto dir = copyModel(tmp, "llama-tiny");
    const auto file = dir / "model-00001-of-00008.safetensors";
    const auto tensors = readAll(file);
    nlohmann::json header = nlohmann::json::object();
    size_t offset = 0;
    std::string data;
    for (const auto& [name, t] : tensors) {
      const size_t n = size_t(t.numel()) * t.element_size();
      header[name] = {
          {"dtype", "F8_E9M9"}, {"shape", t.sizes().vec()}, {"data_offsets", {offset, offset + n}}};
      data.append(static_cast<const char*>(t.data_ptr()), n);
      offset += n;
    }
    const std::string text = header.dump();
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    const uint64_t len = text.size();
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << text << data;
    out.close();
    const std::string e = engineError(dir);
    QVERIFY_CONTAINS(e, file.string());
    QVERIFY_CONTAINS(e, "dtype 'F8_E9M9' is not supported");
  }

  void indexNamesAMissingShardFile() {
    test::TempDir tmp;
    const auto dir = copyModel(tmp, "llama-tiny");
    std::filesystem::remove(dir / "model-00003-of-00008.safetensors");
    const std::string e = engineError(dir);
    QVERIFY_CONTAINS(e, "model-00003-of-00008.safetensors, which is missing");
  }

  void tpThatDoesNotDivideHeads() {
    const std::string e = engineError(test::goldenModel("qwen3-tiny"), 3);
    QVERIFY_CONTAINS(e, "tensor_parallel_size 3 does not divide num_attention_heads (4)");
    QVERIFY_CONTAINS(e, "sizes that work for this model: 1, 2, 4");
  }

  void tpThatDoesNotDivideIntermediateSize() {
    ModelConfig c =
        ModelConfig::parse(R"({"model_type": "qwen3", "vocab_size": 100, "hidden_size": 64,
        "intermediate_size": 130, "num_hidden_layers": 1, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16})",
                           "test config");
    c.checkTensorParallel(2);
    try {
      c.checkTensorParallel(4);
      QFAIL("tp=4 should not divide intermediate_size 130");
    } catch (const CheckpointError& e) {
      QVERIFY_CONTAINS(std::string(e.what()), "does not divide intermediate_size (130)");
    }
  }

  // Qwen3-MoE: which layers are sparse, and the tp each expert layout takes.
  void moeLayersAndTensorParallel() {
    const ModelConfig c = ModelConfig::parse(
        R"({"model_type": "qwen3_moe", "vocab_size": 100, "hidden_size": 64,
        "intermediate_size": 128, "num_hidden_layers": 4, "num_attention_heads": 8,
        "num_key_value_heads": 8, "head_dim": 8, "num_experts": 6, "num_experts_per_tok": 2,
        "moe_intermediate_size": 20, "decoder_sparse_step": 2, "mlp_only_layers": [3]})",
        "test config");
    QCOMPARE(c.moe.numExperts, int64_t(6));
    QVERIFY(!c.isSparseLayer(0) && c.isSparseLayer(1) && !c.isSparseLayer(2) &&
            !c.isSparseLayer(3));
    c.checkTensorParallel(4);        // 20 % 4 == 0
    c.checkTensorParallel(2, true);  // 6 % 2 == 0
    try {
      c.checkTensorParallel(8);
      QFAIL("tp=8 should not divide moe_intermediate_size 20");
    } catch (const CheckpointError& e) {
      QVERIFY_CONTAINS(std::string(e.what()), "does not divide moe_intermediate_size (20)");
      QVERIFY_CONTAINS(std::string(e.what()), "sizes that work for this model: 1, 2, 4");
    }
    try {
      c.checkTensorParallel(4, true);
      QFAIL("tp=4 should not divide 6 experts under expert parallelism");
    } catch (const CheckpointError& e) {
      QVERIFY_CONTAINS(std::string(e.what()),
                       "enable_expert_parallel: tensor_parallel_size 4 does not divide "
                       "num_experts (6); sizes that work for this model with expert "
                       "parallelism: 1, 2");
    }
  }

  void badConfigs_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("message");
    QTest::newRow("not json") << "{"
                              << "not valid JSON";
    QTest::newRow("unknown family") << R"({"model_type": "gpt2"})"
                                    << "model_type 'gpt2' is not supported";
    QTest::newRow("missing field") << R"({"model_type": "llama", "vocab_size": 10})"
                                   << "'hidden_size' is missing";
    QTest::newRow("heads not a multiple of kv heads")
        << R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
             "num_hidden_layers": 1, "num_attention_heads": 3, "num_key_value_heads": 2})"
        << "not a multiple of num_key_value_heads";
    QTest::newRow("unsupported rope")
        << R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8,
        "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2,
        "rope_scaling": {"rope_type": "longrope", "factor": 4.0}})"
        << "rope scaling type 'longrope' is not supported";
    // Fields of the wrong type escaped as json type_error or UB (fuzz/regressions/model_config).
    QTest::newRow("model_type not a string") << R"({"model_type": 5})"
                                             << "'model_type' must be a string, got 5";
    QTest::newRow("eos id out of range")
        << R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
             "num_hidden_layers": 1, "num_attention_heads": 2, "eos_token_id": [1e49]})"
        << "'eos_token_id' must be an id or a list of ids";
    QTest::newRow("positions not an integer")
        << R"({"model_type": "qwen3", "vocab_size": 10, "hidden_size": 8, "intermediate_size": 8,
             "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 2.5})"
        << "'max_position_embeddings' must be an integer, got 2.5";
    // Qwen3-MoE's expert fields.
    const QString moe = R"({"model_type": "qwen3_moe", "vocab_size": 10, "hidden_size": 8,
        "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2, )";
    QTest::newRow("moe without experts")
        << moe + R"("num_experts_per_tok": 2, "moe_intermediate_size": 4})"
        << "'num_local_experts' is missing or not an integer";
    QTest::newRow("moe top-k above the experts")
        << moe + R"("num_experts": 4, "num_experts_per_tok": 5, "moe_intermediate_size": 4})"
        << "'num_experts_per_tok' (5) must be between 1 and num_experts (4)";
    QTest::newRow("moe sparse step zero")
        << moe + R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4,
        "decoder_sparse_step": 0})"
        << "'decoder_sparse_step' must be at least 1";
    QTest::newRow("moe dense layer out of range")
        << moe + R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4,
        "mlp_only_layers": [2]})"
        << "'mlp_only_layers' names layer 2, but the layers are 0..1";
    QTest::newRow("moe dense layers not a list")
        << moe + R"("num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 4,
        "mlp_only_layers": 1})"
        << "'mlp_only_layers' must be a list of layer indices";
    // DeepSeek-V2's latent attention and routing fields.
    const QString ds = R"({"model_type": "deepseek_v2", "vocab_size": 10, "hidden_size": 8,
        "intermediate_size": 8, "num_hidden_layers": 2, "num_attention_heads": 2,
        "moe_intermediate_size": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, )";
    QTest::newRow("deepseek without kv_lora_rank")
        << ds + R"("qk_nope_head_dim": 4, "qk_rope_head_dim": 2, "v_head_dim": 4})"
        << "'kv_lora_rank' is missing or not an integer";
    QTest::newRow("deepseek unknown topk_method")
        << ds + R"("kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2,
        "v_head_dim": 4, "topk_method": "noaux_tc"})"
        << "topk_method 'noaux_tc' is not supported (supported: greedy, group_limited_greedy)";
    QTest::newRow("deepseek groups do not divide the experts")
        << ds + R"("kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2,
        "v_head_dim": 4, "topk_method": "group_limited_greedy", "n_group": 3, "topk_group": 1})"
        << "'n_group' (3) must divide n_routed_experts (4)";
    QTest::newRow("deepseek chosen groups hold too few experts")
        << ds + R"("kv_lora_rank": 4, "qk_nope_head_dim": 4, "qk_rope_head_dim": 2,
        "v_head_dim": 4, "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 1})"
        << "its groups must hold num_experts_per_tok experts";
  }
  void badConfigs() {
    QFETCH(QString, json);
    QFETCH(QString, message);
    try {
      ModelConfig::parse(json.toStdString(), "cfg.json");
      QFAIL("expected an error");
    } catch (const CheckpointError& e) {
      QVERIFY_CONTAINS(std::string(e.what()), message.toStdString());
      QVERIFY_CONTAINS(std::string(e.what()), "cfg.json");
    }
  }

  void missingModelNamesWhereItLooked() {
    qputenv("HF_HUB_CACHE", "/nonexistent/hub");
    const std::string e = engineError("Qwen/Qwen3-NotThere");
    QVERIFY_CONTAINS(e, "/nonexistent/hub/models--Qwen--Qwen3-NotThere");
    QVERIFY_CONTAINS(e, "never downloads");
  }

  void hfCacheLayoutResolves() {
    test::TempDir tmp;
    const auto snapshot = tmp.path() / "hub" / "models--test--tiny" / "snapshots" / "abc123";
    std::filesystem::create_directories(snapshot.parent_path());
    std::filesystem::copy(test::goldenModel("qwen3-tiny"), snapshot,
                          std::filesystem::copy_options::recursive);
    std::filesystem::remove(snapshot / "golden.safetensors");
    std::filesystem::create_directories(tmp.path() / "hub" / "models--test--tiny" / "refs");
    std::ofstream(tmp.path() / "hub" / "models--test--tiny" / "refs" / "main") << "abc123";
    qputenv("HF_HUB_CACHE", (tmp.path() / "hub").string().c_str());
    EngineOptions o;
    o.model = "test/tiny";
    Engine engine(o);
    QCOMPARE(engine.info().numLayers, int64_t(2));
  }
};

QTEST_GUILESS_MAIN(TestCheckpointErrors)
#include "tst_checkpoint_errors.moc"
