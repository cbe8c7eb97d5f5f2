// The seed page's four examples, saved verbatim under tests/trace/scripts/ (model name mapped to a
// Qwen3-8B-width test model: hidden 4096, 32 query heads, 8 KV heads, head_dim 128, vocab 151936,
// 11 layers, small intermediate size, random weights). `shardscope-cli run --tp 2` prints exactly
// the seed's shapes, and the values equal tp=1's.
#include <QtTest>

#include <ATen/ATen.h>

#include <cstring>
#include <fstream>
#include <sstream>

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
  return test::sourceDir() / "tests" / "trace" / "scripts" / name;
}

// The test model: its config beside the real Qwen3 tokenizer (for model.tokenizer.decode).
std::string modelSpec(const test::TempDir& dir) {
  std::filesystem::copy_file(test::sourceDir() / "tests" / "trace" / "qwen3-8b-widths.json",
                             dir.path() / "config.json");
  std::filesystem::create_symlink(qwen3TokenizerAsset(), dir.path() / "tokenizer.json");
  return "random:" + (dir.path() / "config.json").string() + "@1";
}

struct Runner {
  std::vector<std::string> lines;
  std::unique_ptr<trace::ScriptRunner> runner;

  Runner(const std::string& spec, int tp) {
    trace::RunOptions o;
    o.modelDirs["Qwen/Qwen3-8B"] = spec;
    o.tp = tp;
    o.device = test::device();
    o.dtype = "f32";
    o.backend = test::backend();
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

}  // namespace

class TestSeedExamples : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() { spec_ = modelSpec(dir_); }

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
      QVERIFY(at::allclose(two.tensor("z"), z1, 1e-4, 1e-5));
      QVERIFY(at::allclose(two.tensor("resid"), resid1, 1e-4, 1e-5));
      QVERIFY(at::allclose(two.tensor("logits"), logits1, 1e-4, 1e-4));
      QCOMPARE(two.run("seed_2_zero_head.py"), text1);
      two.run("seed_3_rank_order.py");
      // tp=1 lays qkv out as [q | k | v]: query head h is columns h*128 .. h*128+128.
      QVERIFY(at::allclose(two.tensor("q7"), qkv1.narrow(1, 7 * 128, 128), 1e-4, 1e-5));
      QVERIFY(at::allclose(two.tensor("q20"), qkv1.narrow(1, 20 * 128, 128), 1e-4, 1e-5));
      QCOMPARE(two.run("seed_4_parameters.py"), std::string("((4096, 2048), (75968, 4096))"));
    }
    if (test::backend() == "nccl" && at::getNumGPUs() < 4) return;  // tp=4 needs 4 GPUs with NCCL
    Runner four(spec_, 4);
    QCOMPARE(four.run("seed_2_zero_head.py"), text1);
    QCOMPARE(four.run("seed_4_parameters.py"), std::string("((4096, 1024), (37984, 4096))"));
  }

 private:
  test::TempDir dir_;
  std::string spec_;
};

QTEST_GUILESS_MAIN(TestSeedExamples)
#include "tst_seed_examples.moc"
