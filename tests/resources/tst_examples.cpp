// The built-in examples (resources/examples/): `shardscope-cli examples` lists every file and
// prints each byte for byte, and every recipe runs on the CPU through `run --example` with output
// that shows what it claims (the scripts assert their own invariants too). The seed page's
// examples need Qwen3-8B's shapes: tst_seed_examples runs the same files at those widths.
#include <QProcess>
#include <QRegularExpression>
#include <QtTest>
#include <set>

#include "common/random_model.h"
#include "common/test_support.h"
#include "core/file_tree.h"
#include "resources/example_catalog.h"

using namespace shardscope;

namespace {

struct CliResult {
  int code = -1;
  QString out, err;
};

CliResult cli(const QStringList& args) {
  QProcess p;
  p.start(SHARDSCOPE_CLI, args);
  CliResult r;
  if (!p.waitForFinished(600000)) return r;
  r.code = p.exitCode();
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  r.err = QString::fromUtf8(p.readAllStandardError());
  return r;
}

std::filesystem::path examplesDir() {
  return test::sourceDir() / "resources" / "examples";
}

// Every number captured by `pattern`'s first group in `text`.
std::vector<double> numbers(const QString& text, const QString& pattern) {
  std::vector<double> out;
  auto it = QRegularExpression(pattern, QRegularExpression::MultilineOption).globalMatch(text);
  while (it.hasNext()) out.push_back(it.next().captured(1).toDouble());
  return out;
}

}  // namespace

class TestExamples : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    // The small random Qwen3-MoE of the MoE suites, beside the real tokenizer.
    moeSpec_ =
        QString::fromStdString(test::randomModelSpec(dir_.path() / "moe", "qwen3-moe-small.json"));
  }

  void catalogHoldsEveryFile() {
    std::set<std::string> files;
    for (const auto& f : std::filesystem::directory_iterator(examplesDir()))
      if (f.path().extension() == ".py") files.insert(f.path().stem().string());
    std::set<std::string> names;
    for (const examples::Example& e : examples::all()) {
      names.insert(e.name);
      QVERIFY2(e.title != e.name && !e.title.empty(), e.name.c_str());
      QVERIFY2(!e.model.empty(), (e.name + " has no '# Model:' line").c_str());
      QVERIFY2(!e.description.empty(), e.name.c_str());
      QCOMPARE(e.source, readFile(examplesDir() / (e.name + ".py")));
    }
    QCOMPARE(names, files);
    QVERIFY(names.size() >= 11);  // the seed's five and six recipes
    // The Qt resource file lists every example too (the GUI's File > Examples).
    const std::string qrc = readFile(test::sourceDir() / "resources" / "shardscope.qrc");
    for (const auto& n : names)
      QVERIFY2(qrc.find("<file>examples/" + n + ".py</file>") != std::string::npos, n.c_str());
  }

  void cliListsAndPrintsThem() {
    const CliResult list = cli({"examples"});
    QCOMPARE(list.code, 0);
    for (const examples::Example& e : examples::all()) {
      QVERIFY2(list.out.contains(QString::fromStdString(e.name + " ")), e.name.c_str());
      QVERIFY(list.out.contains(QString::fromStdString(e.title)));
      const CliResult one = cli({"examples", QString::fromStdString(e.name)});
      QCOMPARE(one.code, 0);
      QCOMPARE(one.out.toStdString(), e.source);
    }
    const CliResult missing = cli({"run", "--example", "no_such_example"});
    QCOMPARE(missing.code, 1);
    QVERIFY2(missing.err.contains("no example called 'no_such_example'") &&
                 missing.err.contains("logit_lens"),
             qPrintable(missing.err));
    QCOMPARE(cli({"run", "--example", "logit_lens", "other.py"}).code, 2);
  }

  void logitLensEndsAtTheModelsPrediction() {
    const CliResult r = cli({"run", "--example", "logit_lens"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QRegularExpression last(R"(^layer 3: (.*)\nmodel: \1$)",
                                  QRegularExpression::MultilineOption);
    QVERIFY2(last.match(r.out).hasMatch(), qPrintable(r.out));
    QCOMPARE(r.out.count(QRegularExpression("^layer \\d: ", QRegularExpression::MultilineOption)),
             4);
  }

  void steeringMovesTheGeneration() {
    const CliResult r = cli({"run", "--example", "steering"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto moved = numbers(r.out, R"(logits moved by up to ([0-9.e+-]+))");
    QCOMPARE(moved.size(), size_t(1));
    QVERIFY2(moved[0] > 0.1, qPrintable(r.out));
    QVERIFY2(r.out.contains(QRegularExpression(R"(^\d of 8 generated tokens changed$)",
                                               QRegularExpression::MultilineOption)),
             qPrintable(r.out));
  }

  void patchingTheLastLayerRestoresTheCleanAnswer() {
    const CliResult r = cli({"run", "--example", "activation_patching"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto shares = numbers(r.out, R"(^patch layer \d: recovers ([0-9.e+-]+))");
    QCOMPARE(shares.size(), size_t(4));
    QCOMPARE(shares.back(), 1.0);
    // The corrupt prompt changes the clean answer's probability, so there is something to restore.
    const QRegularExpression lp(R"(log p (-?[0-9.]+) after the clean prompt, (-?[0-9.]+))");
    const auto m = lp.match(r.out);
    QVERIFY2(m.hasMatch() && m.captured(1) != m.captured(2), qPrintable(r.out));
  }

  void headAblationZeroesOneHead() {
    const CliResult r = cli({"run", "--example", "head_ablation"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const QRegularExpression slice(R"(o_proj.input \(7, (\d+)\), norm ([0-9.e+-]+) -> 0$)",
                                   QRegularExpression::MultilineOption);
    const auto m = slice.match(r.out);
    QVERIFY2(m.hasMatch(), qPrintable(r.out));  // 7 tokens of the prompt
    QCOMPARE(m.captured(1).toInt(), 32);        // the demo model's head_dim
    QVERIFY(m.captured(2).toDouble() > 0);
    const auto moved = numbers(r.out, R"(logits moved by up to ([0-9.e+-]+))");
    QVERIFY2(moved.size() == 1 && moved[0] > 0, qPrintable(r.out));
  }

  // The demo model's induction head: the repeat of a random sequence is predicted (its loss at
  // most half the first copy's), and layer 3 head 7 puts most of its attention on the token after
  // the previous occurrence.
  void inductionHeadPredictsTheRepeat() {
    const CliResult r = cli({"run", "--example", "induction_head"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto m =
        QRegularExpression(R"(loss on the first copy ([0-9.]+), on the second ([0-9.]+) nats)")
            .match(r.out);
    QVERIFY2(m.hasMatch(), qPrintable(r.out));
    QVERIFY2(m.captured(2).toDouble() <= 0.5 * m.captured(1).toDouble(), qPrintable(r.out));
    const auto weight = numbers(r.out, R"(^layer 3 head 7: ([0-9.]+) of its attention)");
    QVERIFY2(weight.size() == 1 && weight[0] > 0.5, qPrintable(r.out));
  }

  void moduleAblationMeasuresEveryBlock() {
    const CliResult r = cli({"run", "--example", "module_ablation"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    const auto kl = numbers(r.out, R"(^zero layers\[\d\]\.\w+\s*: KL ([0-9.e+-]+))");
    QCOMPARE(kl.size(), size_t(8));  // attention and MLP of 4 layers
    for (double k : kl) QVERIFY2(k > 0, qPrintable(r.out));
  }

  // On a small random Qwen3-MoE (16 experts, top-4), in the expert-parallel layout, recorded in
  // a session log: each token picks 4 distinct experts, the ablated expert is never picked, and
  // `show` says the run used enable_expert_parallel.
  void expertRoutingPicksAndAblatesExperts() {
    const QString db = QString::fromStdString((dir_.path() / "moe.db").string());
    const CliResult r =
        cli({"run", "--example", "expert_routing", "--model-dir", "Qwen/Qwen3-30B-A3B=" + moeSpec_,
             "--enable-expert-parallel", "--log", db});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    auto it = QRegularExpression(R"(^token \d .*: experts \[(\d+), (\d+), (\d+), (\d+)\])",
                                 QRegularExpression::MultilineOption)
                  .globalMatch(r.out);
    int tokens = 0;
    for (; it.hasNext(); ++tokens) {
      const auto m = it.next();
      std::set<int> experts;
      for (int i = 1; i <= 4; ++i) experts.insert(m.captured(i).toInt());
      QCOMPARE(experts.size(), size_t(4));
      QVERIFY(*experts.rbegin() < 16);
    }
    QCOMPARE(tokens, 5);
    QVERIFY2(r.out.contains(QRegularExpression(R"(^tokens still routed to expert \d+: 0$)",
                                               QRegularExpression::MultilineOption)),
             qPrintable(r.out));
    const CliResult show = cli({"show", db, "1"});
    QCOMPARE(show.code, 0);
    QVERIFY2(show.out.contains("tp=2 (enable_expert_parallel)"), qPrintable(show.out));
    const CliResult dense = cli({"run", "--example", "logit_lens", "--log", db});
    QCOMPARE(dense.code, 0);
    QVERIFY(!cli({"show", db, "2"}).out.contains("enable_expert_parallel"));
  }

 private:
  test::TempDir dir_;
  QString moeSpec_;
};

QTEST_GUILESS_MAIN(TestExamples)
#include "tst_examples.moc"
