// The seed page's four examples, saved verbatim (below a header comment) under resources/examples/
// (model name mapped to a Qwen3-8B-width test model: hidden 4096, 32 query heads, 8 KV heads,
// head_dim 128, vocab 151936, 11 layers, small intermediate size, random weights). `shardscope-cli
// run --tp 2` prints exactly the seed's shapes, and the values equal tp=1's. With
// SHARDSCOPE_QWEN3_8B naming a checkpoint of the full Qwen3-8B configuration (scripts/gpu/multi-gpu
// writes one with random bf16 weights), the four scripts also run on it in bf16 and in fp32 at tp=1
// and tp=2 (issue 8). The seed's MoE sentence is seed_5_moe.py, on a small random Qwen3-MoE
// (tests/trace/qwen3-moe-small.json). The four also run on the model split into two pipeline
// stages of tp=2, equal to one rank's values.
#include <QtTest>

#include <ATen/ATen.h>

#include <cctype>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include "common/random_model.h"
#include "common/script_run.h"
#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/trace/script_runner.h"

using namespace shardscope;

namespace {

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::filesystem::path script(const char* name) {
  return test::sourceDir() / "resources" / "examples" / name;
}

struct Runner {
  std::vector<std::string> lines;
  std::unique_ptr<trace::ScriptRunner> runner;

  Runner(const std::string& spec, int tp, const std::string& dtype = "f32",
         const std::string& device = test::device(), const std::string& backend = test::backend(),
         bool expertParallel = false, int pp = 0) {
    trace::RunOptions o;
    o.modelDirs["Qwen/Qwen3-8B"] = spec;
    o.modelDirs["Qwen/Qwen3-30B-A3B"] = spec;  // seed_5_moe.py
    o.expertParallel = expertParallel;
    o.tp = tp;
    o.pp = pp;
    o.device = parseDeviceKind(device);
    o.dtype = parseModelDtype(dtype);
    o.backend = parseGroupBackend(backend);
    o.out = [this](const std::string& l) { lines.push_back(l); };
    runner = std::make_unique<trace::ScriptRunner>(o);
  }
  std::string run(const char* name) {
    lines.clear();
    runner->run(readFile(script(name)), name);
    return lines.empty() ? "" : lines.back();
  }
  at::Tensor tensor(const std::string& name) const {
    auto h = runner->tensorValue(name);
    if (!h) return at::Tensor();
    return fromHostFloat(*h);
  }
};

const char* kNoFullModel =
    "set SHARDSCOPE_QWEN3_8B to a Qwen3-8B checkpoint (scripts/gpu/multi-gpu writes one) on a GPU";

// seed_2 with every step's logits kept, to tell a bf16 near-tie from a real difference.
const char* kZeroHeadWithLogits =
    "from nnsight.modeling.vllm import VLLM\n"
    "model = VLLM(\"Qwen/Qwen3-8B\", dispatch=True, tensor_parallel_size=2)\n"
    "head, d = 7, 128\n"
    "with model.trace(\"The capital of France is\", temperature=0.0, max_tokens=8) as tracer:\n"
    "    rows = list().save()\n"
    "    for _ in tracer.iter[:8]:\n"
    "        model.model.layers[10].self_attn.o_proj.input[:, head * d:(head + 1) * d] = 0\n"
    "        rows.append(model.logits.clone())\n"
    "    out = tracer.result.save()\n"
    "ids = out.outputs[0].token_ids\n"
    "logits = torch.cat(rows)\n";

using test::idList;

// ||a - b|| / ||b||: bf16 results of different shardings differ by rounding, not by ulps.
double relativeError(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
}

// The checkpoint of SHARDSCOPE_QWEN3_8B beside the Qwen3 tokenizer, in a scratch directory; empty
// when the variable is not set.
std::string fullModelSpec(const test::TempDir& dir) {
  const char* checkpoint = std::getenv("SHARDSCOPE_QWEN3_8B");
  if (!checkpoint || !*checkpoint) return "";
  for (const auto& f : std::filesystem::directory_iterator(checkpoint))
    std::filesystem::create_symlink(std::filesystem::absolute(f.path()),
                                    dir.path() / f.path().filename());
  if (!std::filesystem::exists(dir.path() / "tokenizer.json"))
    std::filesystem::create_symlink(qwen3TokenizerAsset(), dir.path() / "tokenizer.json");
  return dir.path().string();
}

}  // namespace

class TestSeedExamples : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    spec_ = test::randomModelSpec(dir_.path(), "qwen3-8b-widths.json");
    moeSpec_ = test::randomModelSpec(dir_.path() / "moe", "qwen3-moe-small.json");
  }

  void cliPrintsTheSeedShapesAtTp2_data() {
    QTest::addColumn<QString>("file");
    QTest::addColumn<QString>("expected");
    QTest::newRow("reads") << "seed_1_reads.py"
                           << "torch.Size([5, 6144]) torch.Size([5, 4096]) torch.Size([5, 4096]) ";
    QTest::newRow("rank order") << "seed_3_rank_order.py"
                                << "torch.Size([5, 128]) torch.Size([5, 128])";
    QTest::newRow("parameters") << "seed_4_parameters.py"
                                << "((4096, 2048), (75968, 4096))";
  }
  void cliPrintsTheSeedShapesAtTp2() {
    QFETCH(QString, file);
    QFETCH(QString, expected);
    QProcess p;
    p.start(SHARDSCOPE_CLI,
            {"run", QString::fromStdString(script(file.toUtf8().constData()).string()), "--tp", "2",
             "--dtype", "f32", "--model-dir", QString::fromStdString("Qwen/Qwen3-8B=" + spec_)});
    QVERIFY(p.waitForFinished(600000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(p.exitCode() == 0, qPrintable(QString::fromUtf8(p.readAllStandardError())));
    QVERIFY2(out.startsWith(expected), qPrintable(out));
  }

  void valuesEqualTp1() {
    at::Tensor z1, resid1, logits1, qkv1;
    std::string text1;
    {  // one engine at a time: each holds about 4.5 GB of fp32 weights
      Runner one(spec_, 1);
      one.run("seed_1_reads.py");
      z1 = one.tensor("z");
      resid1 = one.tensor("resid");
      logits1 = one.tensor("logits");
      qkv1 = one.tensor("qkv");
      text1 = one.run("seed_2_zero_head.py");
    }
    {
      Runner two(spec_, 2);
      two.run("seed_1_reads.py");
      QVERIFY2(test::closeToScale(two.tensor("z"), z1),
               test::closeToScaleMessage(two.tensor("z"), z1).c_str());
      QVERIFY2(test::closeToScale(two.tensor("resid"), resid1),
               test::closeToScaleMessage(two.tensor("resid"), resid1).c_str());
      QVERIFY2(test::closeToScale(two.tensor("logits"), logits1),
               test::closeToScaleMessage(two.tensor("logits"), logits1).c_str());
      QCOMPARE(two.run("seed_2_zero_head.py"), text1);
      two.run("seed_3_rank_order.py");
      // tp=1 lays qkv out as [q | k | v]: query head h is columns h*128 .. h*128+128.
      QVERIFY2(test::closeToScale(two.tensor("q7"), qkv1.narrow(1, 7 * 128, 128)),
               test::closeToScaleMessage(two.tensor("q7"), qkv1.narrow(1, 7 * 128, 128)).c_str());
      QVERIFY2(test::closeToScale(two.tensor("q20"), qkv1.narrow(1, 20 * 128, 128)),
               test::closeToScaleMessage(two.tensor("q20"), qkv1.narrow(1, 20 * 128, 128)).c_str());
      QCOMPARE(two.run("seed_4_parameters.py"), std::string("((4096, 2048), (75968, 4096))"));
    }
    if (test::backend() == "nccl" && at::getNumGPUs() < 4) return;  // tp=4 needs 4 GPUs with NCCL
    Runner four(spec_, 4);
    QCOMPARE(four.run("seed_2_zero_head.py"), text1);
    QCOMPARE(four.run("seed_4_parameters.py"), std::string("((4096, 1024), (37984, 4096))"));
  }

  // The four examples on the model split into two pipeline stages of tp=2 (layers 0-5 and 6-10,
  // vLLM's split of 11 layers): the values, text and shapes of one rank. The seed page says every
  // trace fails there; here the block written against the whole tree runs on every stage.
  void stagesEqualOneRank() {
    if (test::backend() == "nccl" && at::getNumGPUs() < 4) QSKIP("(2, 2) needs 4 GPUs with NCCL");
    at::Tensor z1, resid1, logits1, qkv1;
    std::string text1;
    {  // one engine at a time
      Runner one(spec_, 1);
      one.run("seed_1_reads.py");
      z1 = one.tensor("z");
      resid1 = one.tensor("resid");
      logits1 = one.tensor("logits");
      qkv1 = one.tensor("qkv");
      text1 = one.run("seed_2_zero_head.py");
    }
    Runner staged(spec_, 2, "f32", test::device(), test::backend(), false, 2);
    const std::string shapes = staged.run("seed_1_reads.py");
    QVERIFY2(QString::fromStdString(shapes).startsWith(
                 "torch.Size([5, 6144]) torch.Size([5, 4096]) torch.Size([5, 4096]) "),
             shapes.c_str());
    const std::vector<std::pair<std::string, at::Tensor>> reads = {
        {"z", z1}, {"resid", resid1}, {"logits", logits1}};
    for (const auto& [name, one] : reads) {
      QVERIFY2(test::closeToScale(staged.tensor(name), one),
               test::closeToScaleMessage(staged.tensor(name), one).c_str());
    }
    QCOMPARE(staged.run("seed_2_zero_head.py"), text1);
    staged.run("seed_3_rank_order.py");
    QVERIFY(test::closeToScale(staged.tensor("q7"), qkv1.narrow(1, 7 * 128, 128)));
    QVERIFY(test::closeToScale(staged.tensor("q20"), qkv1.narrow(1, 20 * 128, 128)));
    QCOMPARE(staged.run("seed_4_parameters.py"), std::string("((4096, 2048), (75968, 4096))"));
  }

  // The seed's MoE sentence (seed_5_moe.py) on a small random Qwen3-MoE (16 experts, top-4) with
  // the real tokenizer: at tp=2 the router logits and the experts' output print whole shapes in
  // both expert layouts.
  void cliPrintsWholeMoeShapesAtTp2_data() {
    QTest::addColumn<bool>("expertParallel");
    QTest::newRow("default") << false;
    QTest::newRow("expert_parallel") << true;
  }
  void cliPrintsWholeMoeShapesAtTp2() {
    QFETCH(bool, expertParallel);
    QStringList args = {"run",         QString::fromStdString(script("seed_5_moe.py").string()),
                        "--tp",        "2",
                        "--dtype",     "f32",
                        "--model-dir", QString::fromStdString("Qwen/Qwen3-30B-A3B=" + moeSpec_)};
    if (expertParallel) args << "--enable-expert-parallel";
    QProcess p;
    p.start(SHARDSCOPE_CLI, args);
    QVERIFY(p.waitForFinished(600000));
    const QString out = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(p.exitCode() == 0, qPrintable(QString::fromUtf8(p.readAllStandardError())));
    QVERIFY2(out.startsWith("torch.Size([5, 16]) torch.Size([5, 128])"), qPrintable(out));
  }

  // seed_5_moe.py's values at tp=2 (both layouts) equal tp=1's.
  void moeValuesEqualTp1() {
    Runner one(moeSpec_, 1);
    one.run("seed_5_moe.py");
    const at::Tensor router1 = one.tensor("router"), experts1 = one.tensor("experts"),
                     logits1 = one.tensor("logits");
    QCOMPARE(router1.sizes().vec(), (std::vector<int64_t>{5, 16}));
    for (bool ep : {false, true}) {
      Runner two(moeSpec_, 2, "f32", test::device(), test::backend(), ep);
      two.run("seed_5_moe.py");
      for (const auto& [name, ref] : {std::pair{"router", router1}, std::pair{"experts", experts1},
                                      std::pair{"logits", logits1}}) {
        const at::Tensor got = two.tensor(name);
        QVERIFY2(test::closeToScale(got, ref),
                 (std::string(name) + (ep ? " (expert parallel): " : ": ") +
                  test::closeToScaleMessage(got, ref))
                     .c_str());
      }
    }
  }

  // The full Qwen3-8B configuration in bf16 on the GPU (NCCL when there are two GPUs): tp=2
  // prints the seed's shapes; its values equal tp=1's within bf16 rounding of differently
  // sharded sums, and the zero-head text is the same wherever tp=1's top two logits are not a
  // near-tie (closer than twice the logits' difference at that step).
  void fullQwen3_8bInBf16AtTp2() {
    test::TempDir dir;
    const std::string spec = fullModelSpec(dir);
    if (spec.empty()) QSKIP(kNoFullModel);
    at::Tensor z1, resid1, logits1, qkv1, steps1;
    std::vector<int64_t> ids1;
    {
      Runner one(spec, 1, "bf16", test::device(), "auto");
      one.run("seed_1_reads.py");
      z1 = one.tensor("z");
      resid1 = one.tensor("resid");
      logits1 = one.tensor("logits");
      qkv1 = one.tensor("qkv");
      one.runner->run(kZeroHeadWithLogits, "zero_head_logits.py");
      steps1 = one.tensor("logits");
      ids1 = idList(one.runner->reprOf("ids"));
    }
    Runner two(spec, 2, "bf16", test::device(), "auto");
    QCOMPARE(QString::fromStdString(two.run("seed_1_reads.py"))
                 .left(int(std::strlen(
                     "torch.Size([5, 6144]) torch.Size([5, 4096]) torch.Size([5, 4096]) "))),
             QString("torch.Size([5, 6144]) torch.Size([5, 4096]) torch.Size([5, 4096]) "));
    const double tolerance = 5e-2;
    for (const auto& [name, ref] : std::vector<std::pair<const char*, at::Tensor>>{
             {"z", z1}, {"resid", resid1}, {"logits", logits1}}) {
      const double err = relativeError(two.tensor(name), ref);
      qInfo("%s: relative error tp=2 vs tp=1 %.2e", name, err);
      QVERIFY2(err < tolerance, name);
    }
    QVERIFY(!two.run("seed_2_zero_head.py").empty());
    two.runner->run(kZeroHeadWithLogits, "zero_head_logits.py");
    const std::vector<int64_t> ids2 = idList(two.runner->reprOf("ids"));
    const at::Tensor steps2 = two.tensor("logits");
    QCOMPARE(ids2.size(), ids1.size());
    int nearTies = 0;
    for (size_t k = 0; k < ids1.size(); ++k) {
      const at::Tensor top = std::get<0>(steps1[int64_t(k)].topk(2));
      const double gap = (top[0] - top[1]).item<double>();
      const double diff = (steps2[int64_t(k)] - steps1[int64_t(k)]).abs().max().item<double>();
      if (gap < 2 * diff) ++nearTies;
      if (ids1[k] == ids2[k]) continue;
      QVERIFY2(gap < 2 * diff, qPrintable(QString("step %1: ids %2 vs %3, top-2 gap %4, diff %5")
                                              .arg(k)
                                              .arg(ids1[k])
                                              .arg(ids2[k])
                                              .arg(gap)
                                              .arg(diff)));
      break;  // after a near-tie the two texts continue from different tokens
    }
    qInfo("zero-head text: %s; %d of %zu steps near-ties",
          ids1 == ids2 ? "identical ids" : "ids differ after a near-tie", nearTies, ids1.size());
    QCOMPARE(two.run("seed_3_rank_order.py"),
             std::string("torch.Size([5, 128]) torch.Size([5, 128])"));
    QVERIFY(relativeError(two.tensor("q7"), qkv1.narrow(1, 7 * 128, 128)) < tolerance);
    QVERIFY(relativeError(two.tensor("q20"), qkv1.narrow(1, 20 * 128, 128)) < tolerance);
    QCOMPARE(two.run("seed_4_parameters.py"), std::string("((4096, 2048), (75968, 4096))"));
  }

  // The same weights computed in fp32: tp=2 agrees with tp=1 to fp32 rounding.
  void fullQwen3_8bInFp32AtTp2() {
    test::TempDir dir;
    const std::string spec = fullModelSpec(dir);
    if (spec.empty()) QSKIP(kNoFullModel);
    std::map<std::string, at::Tensor> one;
    std::string text1;
    {
      Runner r(spec, 1, "f32", test::device(), "auto");
      r.run("seed_1_reads.py");
      for (const char* name : {"z", "resid", "logits"}) one[name] = r.tensor(name);
      text1 = r.run("seed_2_zero_head.py");
    }
    Runner two(spec, 2, "f32", test::device(), "auto");
    two.run("seed_1_reads.py");
    for (const auto& [name, ref] : one) {
      const double err = relativeError(two.tensor(name), ref);
      qInfo("fp32 %s: relative error tp=2 vs tp=1 %.2e", name.c_str(), err);
      QVERIFY2(err < 1e-4, name.c_str());
    }
    QCOMPARE(two.run("seed_2_zero_head.py"), text1);
  }

 private:
  test::TempDir dir_;
  std::string spec_, moeSpec_;
};

QTEST_GUILESS_MAIN(TestSeedExamples)
#include "tst_seed_examples.moc"
