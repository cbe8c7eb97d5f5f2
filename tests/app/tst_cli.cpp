// shardscope-cli end to end: generate (sampled ids past the tokenizer included), inspect, tokenize
// and make-checkpoint, the session-log commands (with each trace's time and stop strings, and
// run --timing), their --help, and usage errors (exit status 2, a message naming the option,
// never a stack trace). Progress of loading and generating shows on a terminal, not in a pipe.
#include <QtTest>

#include "common/test_support.h"
#include "core/model/model_source.h"

namespace {

struct Result {
  int code;
  QString out, err;
};

Result cli(const QStringList& args) {
  QProcess p;
  p.start(SHARDSCOPE_CLI, args);
  if (!p.waitForFinished(600000)) return {-1, "", "timed out"};
  return {p.exitCode(), QString::fromUtf8(p.readAllStandardOutput()),
          QString::fromUtf8(p.readAllStandardError())};
}

QString golden(const char* model) {
  return QString::fromStdString(shardscope::test::goldenModel(model).string());
}

// Raw strings stay out of the test class: moc cannot parse them inside class bodies.
constexpr const char* kSampleScript = R"(model = VLLM("demo", tensor_parallel_size=2)
with model.trace("Once upon a time", temperature=0.8, seed=3, max_tokens=12) as tracer:
    out = tracer.result.save()
print(151691 in out.outputs[0].token_ids, "<|id" in out.outputs[0].text)
)";

}  // namespace

class TestCli : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void helpForEveryCommand_data() {
    QTest::addColumn<QString>("command");
    for (const char* c : {"run", "generate", "inspect", "tokenize", "make-checkpoint", "log",
                          "show", "replay", "diff", "export", "examples"})
      QTest::newRow(c) << c;
  }
  void helpForEveryCommand() {
    QFETCH(QString, command);
    const Result r = cli({command, "--help"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.startsWith("usage: shardscope-cli " + command));
  }

  void usageErrors_data() {
    QTest::addColumn<QStringList>("args");
    QTest::addColumn<QString>("message");
    QTest::newRow("no command") << QStringList{} << "usage:";
    QTest::newRow("unknown command") << QStringList{"frobnicate"} << "unknown command 'frobnicate'";
    QTest::newRow("unknown option")
        << QStringList{"generate", "--colour", "x", "hi"} << "unknown option --colour";
    QTest::newRow("bad integer") << QStringList{"generate", "--tp", "two", "hi"}
                                 << "--tp expects an integer, got 'two'";
    QTest::newRow("missing value")
        << QStringList{"generate", "hi", "--max-tokens"} << "--max-tokens needs a value";
    QTest::newRow("no prompt") << QStringList{"generate"} << "generate needs a prompt";
    QTest::newRow("tokenize without text")
        << QStringList{"tokenize"} << "needs exactly one text argument";
  }
  void usageErrors() {
    QFETCH(QStringList, args);
    QFETCH(QString, message);
    const Result r = cli(args);
    QCOMPARE(r.code, 2);
    QVERIFY2(r.err.contains(message), qPrintable(r.err));
  }

  void userErrorsExitWithOne() {
    const Result missing = cli({"generate", "--model", "/no/such/model", "hi"});
    QCOMPARE(missing.code, 1);
    QVERIFY2(missing.err.contains("model not found"), qPrintable(missing.err));
    const Result tp = cli({"generate", "--tp", "3", "hi"});
    QCOMPARE(tp.code, 1);
    QVERIFY2(tp.err.contains("does not divide"), qPrintable(tp.err));
    const Result noTokenizer =
        cli({"generate", "--model", golden("qwen3-tiny"), "text needs a tokenizer"});
    QCOMPARE(noTokenizer.code, 1);
    QVERIFY2(noTokenizer.err.contains("--ids"), qPrintable(noTokenizer.err));
  }

  void generateGreedyIdsMatchTransformers_data() {
    QTest::addColumn<QString>("tp");
    QTest::newRow("tp1") << "1";
    QTest::newRow("tp2") << "2";
  }
  void generateGreedyIdsMatchTransformers() {
    QFETCH(QString, tp);
    // HF's greedy continuation of this prompt (tests/golden/models/qwen3-tiny/golden.safetensors).
    const Result r = cli({"generate", "--model", golden("qwen3-tiny"), "--tp", tp, "--ids",
                          "3,17,42,99,123,200,7", "--max-tokens", "9", "--ignore-eos", "--quiet"});
    QCOMPARE(r.code, 0);
    QCOMPARE(r.out.trimmed(), QString("108,237,164,209,197,164,117,164,17"));
  }

  // Each --ids is a prompt of its own; batched, each continues as it does alone. Repeated
  // --stop-ids join.
  void repeatedIdsAreSeveralPrompts() {
    const QStringList base = {"generate",     "--model", golden("qwen3-tiny"), "--max-tokens", "9",
                              "--ignore-eos", "--quiet"};
    const Result both =
        cli(base + QStringList{"--ids", "3,17,42,99,123,200,7", "--ids", "5,6,7,8"});
    const Result second = cli(base + QStringList{"--ids", "5,6,7,8"});
    QVERIFY2(both.code == 0 && second.code == 0, qPrintable(both.err + second.err));
    const QStringList lines = both.out.trimmed().split('\n');
    QCOMPARE(lines.size(), 2);
    QCOMPARE(lines[0], QString("108,237,164,209,197,164,117,164,17"));
    QCOMPARE(lines[1], second.out.trimmed());
    const QStringList prompt = {"--ids", "3,17,42,99,123,200,7"};
    const Result joined = cli(base + prompt + QStringList{"--stop-ids", "209,117"});
    const Result repeated =
        cli(base + prompt + QStringList{"--stop-ids", "209", "--stop-ids", "117"});
    QCOMPARE(repeated.out, joined.out);
    QVERIFY2(joined.out.trimmed().split(',').size() < 9, qPrintable(joined.out));
  }

  void generateTextIsTheSameAtTp1And2() {
    const Result a = cli({"generate", "--quiet", "--max-tokens", "8", "The capital of France is"});
    const Result b =
        cli({"generate", "--quiet", "--tp", "2", "--max-tokens", "8", "The capital of France is"});
    QCOMPARE(a.code, 0);
    QVERIFY(!a.out.trimmed().isEmpty());
    QCOMPARE(b.out, a.out);
  }

  // Issue 22's commands on the random test model (151936 rows, a tokenizer of 151669 ids), which
  // samples id 151691 at this seed. generate prints it as a marker; a script's text leaves it out
  // as vLLM's does, its token_ids keep it, and the session log shows the marker.
  void sampledIdsPastTheTokenizerDoNotEndTheRun() {
    const QString random = QString::fromStdString(shardscope::ensureDemoModel().string());
    const Result r = cli({"generate", "--model", random, "--tp", "2", "--temperature", "0.8",
                          "--seed", "3", "--max-tokens", "12", "Once upon a time"});
    QVERIFY2(r.code == 0, qPrintable(r.err));
    QVERIFY2(r.out.contains("<|id 151691|>"), qPrintable(r.out));
    shardscope::test::TempDir dir;
    const QString db = QString::fromStdString((dir.path() / "s.db").string());
    const QString script = QString::fromStdString((dir.path() / "sample.py").string());
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(kSampleScript);
    }
    const Result run = cli({"run", script, "--log", db, "--model-dir", "demo=" + random});
    QVERIFY2(run.code == 0, qPrintable(run.err));
    QVERIFY2(run.out.contains("True False"), qPrintable(run.out));
    const Result show = cli({"show", db, "1"});
    QCOMPARE(show.code, 0);
    QVERIFY2(show.out.contains("151691") && show.out.contains("<|id 151691|>"),
             qPrintable(show.out));
  }

  void inspectShowsPortsAndShards() {
    const Result r = cli({"inspect", "--tp", "2"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.contains("model.model.layers[0].self_attn.qkv_proj  (QKVParallelLinear)"));
    // Demo model: 8 query heads, 4 KV heads, head_dim 32, hidden 256, vocabulary 8192; tp=2
    // holds 4 q + 2 k + 2 v heads. The prompt is 7 tokens.
    QVERIFY2(r.out.contains(".output  [fused]  ([7, 256], None) -> ([7, 512], None)"),
             qPrintable(r.out));
    QVERIFY(r.out.contains(".input  [row]  [7, 128] -> [7, 256]"));
    QVERIFY(r.out.contains(".weight  shard [256, 128] of [256, 256]"));  // o_proj
    QVERIFY(r.out.contains("model.lm_head  (ParallelLMHead)"));
    QVERIFY(r.out.contains(".weight  shard [4096, 256] of [8192, 256]"));
    // A small model's CPU ranks run with one thread unless --threads asks for more.
    QVERIFY2(r.out.contains("1 CPU thread per rank (--threads)"), qPrintable(r.out));
    const Result three = cli({"inspect", "--threads", "3"});
    QCOMPARE(three.code, 0);
    QVERIFY2(three.out.contains("3 CPU threads per rank (--threads)"), qPrintable(three.out));
  }

  // The "kv cache: N bytes per token per rank" figure of `inspect` (-1 when absent).
  static int kvBytesPerToken(const QString& out) {
    const auto m = QRegularExpression("kv cache: (\\d+) bytes per token per rank").match(out);
    return m.hasMatch() ? m.captured(1).toInt() : -1;
  }

  // Pipeline stages: the tree shows which stage holds each module (the demo's 4 layers: 0-1 on
  // stage 0, 2-3 on stage 1), and the stage-1 modules' ports and shards come from that stage.
  void inspectShowsStages() {
    const Result r = cli({"inspect", "--tp", "2", "--pp", "2"});
    QCOMPARE(r.code, 0);
    QVERIFY2(r.out.contains("4 layers, tp=2, pp=2"), qPrintable(r.out));
    QVERIFY(r.out.contains("model.model.embed_tokens  (VocabParallelEmbedding)  stage 0"));
    QVERIFY(r.out.contains("model.model.layers[1]  (DecoderLayer)  stage 0"));
    QVERIFY(r.out.contains("model.model.layers[2]  (DecoderLayer)  stage 1"));
    QVERIFY(
        r.out.contains("model.lm_head  (ParallelLMHead)  stage 1\n"
                       "      .weight  shard [4096, 256] of [8192, 256]"));
    QVERIFY2(r.out.contains("model.model.layers[3].self_attn.o_proj  (RowParallelLinear)  stage 1\n"
                            "              .input  [row]  [7, 128] -> [7, 256]"),
             qPrintable(r.out));
    // Each stage keeps the KV cache of its own layers only: half of one stage's.
    const Result single = cli({"inspect", "--tp", "2"});
    QCOMPARE(kvBytesPerToken(r.out), kvBytesPerToken(single.out) / 2);
    const Result generated = cli({"generate", "--pp", "2", "--max-tokens", "3", "Hello"});
    const Result one = cli({"generate", "--max-tokens", "3", "Hello"});
    QCOMPARE(generated.code, 0);
    QCOMPARE(generated.out, one.out);
  }

  // DeepSeek-V2-Lite style at tp=4, dcp=2: the MLA and MoE modules with their shard kinds, the
  // group-sharded q_proj, and the latent KV cache a token costs a rank (halved by dcp=2).
  void inspectShowsMlaAndDcp() {
    const QString model =
        QString::fromStdString(shardscope::test::goldenModel("deepseek-v2-lite-tiny").string());
    const Result r = cli({"inspect", "--model", model, "--tp", "4", "--dcp", "2"});
    QCOMPARE(r.code, 0);
    for (const char* line :
         {"model.model.layers[1].self_attn.q_proj  (DCPGroupColumnParallelLinear)",
          ".output  [dcp-group]  ([5, 48], None) -> ([5, 96], None)",
          "model.model.layers[1].self_attn.kv_a_proj_with_mqa  (ReplicatedLinear)",
          "model.model.layers[1].self_attn.kv_b_proj  (ColumnParallelLinear)",
          ".output  [column]  ([5, 32], None) -> ([5, 128], None)",
          "model.model.layers[1].self_attn.mla_attn  (MLAAttention)",
          "model.model.layers[1].mlp.shared_experts  (MLP)", ".output  [partial]  [5, 64]",
          "model.model.layers[1].mlp.experts  (FusedMoE)",
          "kv cache: 240 bytes per token per rank"})
      QVERIFY2(r.out.contains(line), qPrintable(QString(line) + " not in:\n" + r.out));
    const Result one = cli({"inspect", "--model", model, "--tp", "4"});
    QVERIFY2(one.out.contains("kv cache: 480 bytes per token per rank"), qPrintable(one.out));
  }

  // Qwen3's ids for the prompt, through the random test model (it has Qwen3's tokenizer).
  void tokenizePrintsIdsAndPieces() {
    const Result r =
        cli({"tokenize", "--model", QString::fromStdString(shardscope::ensureDemoModel().string()),
             "The capital of France is"});
    QCOMPARE(r.code, 0);
    QVERIFY(r.out.startsWith("785 6722 315 9625 374\n"));
    QVERIFY(r.out.contains("9625\tĠFrance\t France"));
  }

  void makeCheckpointThenGenerate() {
    shardscope::test::TempDir dir;
    const QString out = QString::fromStdString((dir.path() / "ckpt").string());
    const QString config = QString::fromStdString(
        (shardscope::test::goldenModel("llama-tiny") / "config.json").string());
    const Result made =
        cli({"make-checkpoint", "--config", config, "--seed", "3", "--dtype", "f32", out});
    QCOMPARE(made.code, 0);
    const Result fromFile = cli({"generate", "--model", out, "--ids", "1,2,3", "--max-tokens", "6",
                                 "--quiet", "--tp", "2"});
    const Result fromSeed = cli({"generate", "--model", "random:" + config + "@3", "--ids", "1,2,3",
                                 "--max-tokens", "6", "--quiet"});
    QCOMPARE(fromFile.code, 0);
    QCOMPARE(fromFile.out, fromSeed.out);
    QCOMPARE(cli({"make-checkpoint", "--config", config, out}).code, 1);  // refuses to overwrite
  }

  // run --log, log, show, show --value, replay, export: the session log from the command line.
  void sessionLogCommands() {
    shardscope::test::TempDir dir;
    const QString db = QString::fromStdString((dir.path() / "s.db").string());
    const QString script = QString::fromStdString((dir.path() / "read.py").string());
    {
      QFile f(script);
      QVERIFY(f.open(QIODevice::WriteOnly));
      f.write(
          "model = VLLM(\"demo\", tensor_parallel_size=2)\n"
          "with model.trace(\"The capital of France is\", max_tokens=3, stop=[\"@@@\"]):\n"
          "    h = model.model.layers[1].self_attn.o_proj.input.save()\n"
          "print(h.shape)\n");
    }
    // A trace's time: "12.3 ms, 3 steps" (three tokens, one step each).
    const QRegularExpression traceTime("\\d+\\.\\d+ m?s, 3 steps");
    for (int i = 0; i < 2; ++i) {
      const QStringList timing = i == 0 ? QStringList{"--timing"} : QStringList{};
      const Result r =
          cli(QStringList{"run", script, "--log", db, "--title", "read o_proj"} + timing);
      QCOMPARE(r.code, 0);
      QVERIFY2(r.err.contains("recorded as run " + QString::number(i + 1)), qPrintable(r.err));
      QCOMPARE(r.err.contains(QRegularExpression("trace 0: " + traceTime.pattern())), i == 0);
    }
    const Result unlogged = cli({"run", script, "--timing"});
    QCOMPARE(unlogged.code, 0);
    QVERIFY2(unlogged.err.contains(QRegularExpression("trace 0: " + traceTime.pattern() + "\n")),
             qPrintable(unlogged.err));
    const Result log = cli({"log", db});
    QCOMPARE(log.code, 0);
    QCOMPARE(log.out.count("read o_proj"), 2);
    QCOMPARE(log.out.count(" done "), 2);
    QVERIFY2(log.out.contains("TRACE TIME   STEPS"), qPrintable(log.out));
    QCOMPARE(log.out.count(QRegularExpression(" s +\\d+\\.\\d+ m?s +3  2 ")), 2);
    const Result show = cli({"show", db, "1"});
    QCOMPARE(show.code, 0);
    QVERIFY2(show.out.contains("saved h: float32 [7, 256]"), qPrintable(show.out));
    QVERIFY(show.out.contains("tp=2"));
    QVERIFY2(show.out.contains(QRegularExpression("\n  time " + traceTime.pattern() + "\n")),
             qPrintable(show.out));
    QVERIFY2(show.out.contains("max_tokens=3 temperature=0 top_k=0 top_p=1 seed=0 stop=[\"@@@\"]"),
             qPrintable(show.out));
    const Result value = cli({"show", db, "1", "--value", "h", "--limit", "3"});
    QCOMPARE(value.code, 0);
    QVERIFY2(value.out.startsWith("float32 [7, 256]  min"), qPrintable(value.out));
    QVERIFY(value.out.contains("... 1789 more"));
    const Result replay = cli({"replay", db, "2"});
    QCOMPARE(replay.code, 0);
    QVERIFY2(replay.out.contains("h                                bit-identical"),
             qPrintable(replay.out));
    QVERIFY(replay.out.contains("text matches"));
    QVERIFY(replay.out.contains("replay of run 2 (recorded as run 3): identical"));
    const QString out = QString::fromStdString((dir.path() / "values.safetensors").string());
    const Result exported = cli({"export", db, "1", out});
    QCOMPARE(exported.code, 0);
    QVERIFY(exported.out.contains("wrote 1 tensors"));
    QVERIFY(QFileInfo(out).size() > 7 * 256 * 4);
    const Result missing = cli({"show", db, "9"});
    QCOMPARE(missing.code, 1);
    QVERIFY2(missing.err.contains("run 9 is not in") && missing.err.contains("runs there: 1, 2, 3"),
             qPrintable(missing.err));
    const Result notDb = cli({"log", script});
    QCOMPARE(notDb.code, 1);
    QVERIFY2(notDb.err.contains("not a SQLite database"), qPrintable(notDb.err));
    QCOMPARE(cli({"show", db, "one"}).code, 2);
  }

  // In a pipe (as here) stderr has only the summary line; under a pseudo-terminal (script(1))
  // the load and the generation draw a status line that is cleared when they end.
  void progressOnlyOnATerminal() {
    const QStringList args = {
        "generate", "--tp", "2", "--max-tokens", "24", "--ignore-eos", "The capital of France is"};
    const Result piped = cli(args);
    QCOMPARE(piped.code, 0);
    QVERIFY2(!piped.err.contains('\r') && !piped.err.contains("loading"), qPrintable(piped.err));
    QCOMPARE(piped.err.count('\n'), 1);  // "N tokens in M steps, ..."
    if (QStandardPaths::findExecutable("script").isEmpty()) QSKIP("script(1) is not installed");
    QStringList quoted;
    for (const QString& a : args) quoted << "'" + a + "'";
    QProcess p;
    p.start("script", {"-qec", QString(SHARDSCOPE_CLI) + " " + quoted.join(' '), "/dev/null"});
    QVERIFY(p.waitForFinished(600000));
    QCOMPARE(p.exitCode(), 0);
    const QString tty = QString::fromUtf8(p.readAllStandardOutput());
    QVERIFY2(tty.contains("\r\x1b[Kloading "), qPrintable(tty));
    QVERIFY2(tty.contains(QRegularExpression("loading (\\d+)/\\1: ")), qPrintable(tty));
    QVERIFY2(tty.contains("tokens in"), qPrintable(tty));
  }
};

QTEST_GUILESS_MAIN(TestCli)
#include "tst_cli.moc"
