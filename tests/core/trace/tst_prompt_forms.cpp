// The prompt forms of `model.trace(prompt)` and `tracer.invoke(prompt)` on the demo model at tp=2
// (core/trace/prompt_forms.h): a batch of prompts (strings, id lists, dicts, a 2-D tensor or
// input_ids) is one request a prompt, with the rows, values and results of the same prompts given
// one per invoke; TokensPrompt, text-prompt and tokenizer-output dicts give the request of their
// ids (positions whose attention_mask is 0 dropped); anything else is an error at the script's
// line that lists the forms that work; a name another invoke has not yet assigned is reported as
// a cross-invoke ordering error.
#include <QtTest>

#include <ATen/ATen.h>

#include "common/tensor_checks.h"
#include "common/test_support.h"
#include "core/host_tensor_conversion.h"
#include "core/model/model_source.h"
#include "core/trace/script_runner.h"

using namespace shardscope;

namespace {

constexpr int kTp = 2;

// "The capital of France is" in the Qwen3 tokenizer.
const char* kIds = "[785, 6722, 315, 9625, 374]";

// One runner for the suite: its engine is loaded once and serves every script.
class Session {
 public:
  Session() {
    trace::RunOptions o;
    o.modelDirs["demo"] = ensureDemoModel().string();
    o.tp = kTp;
    o.device = test::deviceKind();
    o.dtype = DType::F32;
    o.backend = test::groupBackend();
    o.out = [this](const std::string& l) { lines.push_back(l); };
    o.note = [](const std::string&) {};
    runner_ = std::make_unique<trace::ScriptRunner>(o);
  }

  // Runs `body` after `model = VLLM("demo")` (line 1); returns the error, empty when none.
  std::string run(const std::string& body, const std::string& file = "test.py") {
    lines.clear();
    try {
      runner_->run("model = VLLM(\"demo\")\n" + body, file);
    } catch (const std::exception& e) {
      return e.what();
    }
    return {};
  }

  at::Tensor tensor(const std::string& name) const {
    auto h = runner_->tensorValue(name);
    if (!h) return at::Tensor();
    return fromHostFloat(*h);
  }
  std::string repr(const std::string& name) const { return runner_->reprOf(name); }

  std::vector<std::string> lines;

 private:
  std::unique_ptr<trace::ScriptRunner> runner_;
};

// The block every equality test runs: layer 1's hidden rows, three steps of logits, the result.
std::string block(const std::string& indent, const std::string& suffix) {
  return indent + "h" + suffix + " = model.model.layers[1].output[0].clone().save()\n" + indent +
         "rows" + suffix + " = list().save()\n" + indent + "for _ in tracer.iter[:3]:\n" + indent +
         "    rows" + suffix + ".append(model.logits.clone())\n" + indent + "out" + suffix +
         " = tracer.result.save()\n";
}

const char* kTraceParams = "max_tokens=3, ignore_eos=True";

std::string batchScript(const std::string& prompt) {
  return "from vllm import TokensPrompt\nwith model.trace(" + prompt + ", " + kTraceParams +
         ") as tracer:\n" + block("    ", "") + "logits = torch.cat(rows)\n";
}

// The same prompts, one invoke each: names h0, rows0, out0, logits0, h1, ...
std::string perInvokeScript(const QStringList& prompts) {
  std::string s = "from vllm import TokensPrompt\nwith model.trace(" + std::string(kTraceParams) +
                  ") as tracer:\n";
  for (int i = 0; i < prompts.size(); ++i) {
    s += "    with tracer.invoke(" + prompts[i].toStdString() + "):\n";
    s += block("        ", std::to_string(i));
  }
  for (int i = 0; i < prompts.size(); ++i) {
    const std::string k = std::to_string(i);
    s += "logits" + k + " = torch.cat(rows" + k + ")\n";
  }
  return s;
}

std::string mismatch(const std::string& what, const at::Tensor& a, const at::Tensor& b) {
  return what + ": " + test::closeToScaleMessage(a, b);
}

}  // namespace

class TestPromptForms : public QObject {
  Q_OBJECT
 private:
  std::unique_ptr<Session> s_;

 private Q_SLOTS:
  void initTestCase() { s_ = std::make_unique<Session>(); }

  // A batch is one request a prompt, equal to the same prompts given one per invoke.
  void batchEqualsOneInvokePerPrompt_data() {
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<QStringList>("each");   // the same prompts for one invoke each
    QTest::addColumn<QList<int>>("tokens");  // prompt lengths
    QTest::newRow("list of strings")
        << "[\"The capital of France is\", \"Hello\"]"
        << QStringList{"\"The capital of France is\"", "\"Hello\""} << QList<int>{5, 1};
    QTest::newRow("list of id lists")
        << "[[785, 6722], [9707]]" << QStringList{"[785, 6722]", "[9707]"} << QList<int>{2, 1};
    QTest::newRow("tuple of prompts of every form")
        << "(\"Hello\", [785, 6722, 315], TokensPrompt(prompt_token_ids=[9625, 374]), "
           "{\"prompt\": \"Hi\"}, {\"input_ids\": [0, 785], \"attention_mask\": [0, 1]})"
        << QStringList{"\"Hello\"", "[785, 6722, 315]", "{\"prompt_token_ids\": [9625, 374]}",
                       "\"Hi\"", "[785]"}
        << QList<int>{1, 3, 2, 1, 1};
    QTest::newRow("2-D tensor") << "torch.tensor([[785, 6722], [9707, 11]])"
                                << QStringList{"[785, 6722]", "[9707, 11]"} << QList<int>{2, 2};
    QTest::newRow("tokenizer output, rows with padding masked")
        << "{\"input_ids\": [[0, 0, 785, 6722], [9707, 11, 315, 374]], \"attention_mask\": [[0, "
           "0, 1, 1], [1, 1, 1, 1]]}"
        << QStringList{"[785, 6722]", "[9707, 11, 315, 374]"} << QList<int>{2, 4};
    QTest::newRow("tokenizer output as tensors")
        << "{\"input_ids\": torch.tensor([[785, 6722, 315], [9707, 11, 0]]), \"attention_mask\": "
           "torch.tensor([[1, 1, 1], [1, 1, 0]])}"
        << QStringList{"[785, 6722, 315]", "[9707, 11]"} << QList<int>{3, 2};
  }
  void batchEqualsOneInvokePerPrompt() {
    QFETCH(QString, prompt);
    QFETCH(QStringList, each);
    QFETCH(QList<int>, tokens);
    const int64_t n = each.size();
    int64_t total = 0;
    for (int t : tokens) total += t;

    QCOMPARE(s_->run(batchScript(prompt.toStdString())), std::string());
    const at::Tensor h = s_->tensor("h"), logits = s_->tensor("logits");
    const std::string out = s_->repr("out");
    QCOMPARE(h.sizes().vec(), (std::vector<int64_t>{total, 32}));  // every prompt's tokens
    QCOMPARE(logits.size(0), 3 * n);                               // a row a prompt a step

    QCOMPARE(s_->run(perInvokeScript(each)), std::string());
    std::vector<at::Tensor> hs, steps;
    std::string outs = "[";
    for (int64_t i = 0; i < n; ++i) {
      const std::string k = std::to_string(i);
      hs.push_back(s_->tensor("h" + k));
      QCOMPARE(hs.back().size(0), int64_t(tokens[int(i)]));
      steps.push_back(s_->tensor("logits" + k));
      outs += (i ? ", " : "") + s_->repr("out" + k);
    }
    const at::Tensor hEach = at::cat(hs);
    QVERIFY2(at::equal(h, hEach), mismatch("h", h, hEach).c_str());
    // The batch's rows are step by step, each step a row a prompt.
    const at::Tensor lEach = at::stack(steps, 1).reshape({3 * n, -1});
    QVERIFY2(at::equal(logits, lEach), mismatch("logits", logits, lEach).c_str());
    QCOMPARE(out, n == 1 ? outs.substr(1) : outs + "]");
  }

  // Single prompts in every form give the request of the same ids.
  void singleFormsGiveTheSameRequest_data() {
    QTest::addColumn<QString>("prompt");
    QTest::addColumn<QString>("ids");  // the ids it should stand for
    const QString ids = kIds;
    QTest::newRow("string") << "\"The capital of France is\"" << ids;
    QTest::newRow("id list") << ids << ids;
    QTest::newRow("id tuple") << "(785, 6722, 315, 9625, 374)" << ids;
    QTest::newRow("1-D tensor") << "torch.tensor(" + ids + ")" << ids;
    QTest::newRow("one-prompt batch") << "[\"The capital of France is\"]" << ids;
    QTest::newRow("TokensPrompt dict") << "{\"prompt_token_ids\": " + ids + "}" << ids;
    QTest::newRow("TokensPrompt from vllm") << "TokensPrompt(prompt_token_ids=" + ids + ")" << ids;
    QTest::newRow("vllm.inputs.TokensPrompt")
        << "vllm.inputs.TokensPrompt(prompt_token_ids=" + ids + ")" << ids;
    QTest::newRow("text prompt dict") << "{\"prompt\": \"The capital of France is\"}" << ids;
    QTest::newRow("tokenizer output") << "{\"input_ids\": " + ids + "}" << ids;
    QTest::newRow("tokenizer output, mask of ones")
        << "{\"input_ids\": " + ids + ", \"attention_mask\": [1, 1, 1, 1, 1]}" << ids;
    QTest::newRow("mask drops left padding")
        << "{\"input_ids\": [0, 0, 785, 6722, 315, 9625, 374], \"attention_mask\": [0, 0, 1, 1, "
           "1, 1, 1]}"
        << ids;
    QTest::newRow("mask drops a middle token")
        << "{\"input_ids\": [785, 6722, 11, 315, 9625, 374], \"attention_mask\": [1, 1, 0, 1, 1, "
           "1]}"
        << ids;
    QTest::newRow("bool mask tensor, one row")
        << "{\"input_ids\": torch.tensor([[785, 6722, 315, 9625, 374, 0]]), \"attention_mask\": "
           "torch.tensor([[1, 1, 1, 1, 1, 0]]).bool()}"
        << ids;
    QTest::newRow("masked ids differ") << "{\"input_ids\": [785, 6722, 315, 9625, 374], "
                                          "\"attention_mask\": [1, 1, 1, 0, 1]}"
                                       << "[785, 6722, 315, 374]";
  }
  void singleFormsGiveTheSameRequest() {
    QFETCH(QString, prompt);
    QFETCH(QString, ids);
    const auto script = [](const QString& p) {
      return "import vllm\nfrom vllm import TokensPrompt\nwith model.trace(" + p.toStdString() +
             ", " + kTraceParams + ") as tracer:\n" + block("    ", "") +
             "logits = torch.cat(rows)\n";
    };
    QCOMPARE(s_->run(script(ids)), std::string());
    const at::Tensor h = s_->tensor("h"), logits = s_->tensor("logits");
    const std::string out = s_->repr("out");
    QCOMPARE(s_->run(script(prompt)), std::string());
    QVERIFY2(at::equal(s_->tensor("h"), h), mismatch("h", s_->tensor("h"), h).c_str());
    QVERIFY(at::equal(s_->tensor("logits"), logits));
    QCOMPARE(s_->repr("out"), out);
    QCOMPARE(logits.size(0), int64_t(3));
  }

  // A batched invoke beside a plain one: its rows, its writes and tracer.stop() are its own.
  void batchedInvokeAmongOthers() {
    const char* batched =
        "with model.trace(max_tokens=1) as tracer:\n"
        "    with tracer.invoke([\"The capital of France is\", \"Hi\"]):\n"
        "        a = model.model.layers[1].output[0].clone().save()\n"
        "        model.model.layers[2].mlp.output[:] = 0\n"
        "        la = model.logits.save()\n"
        "    with tracer.invoke(\"Hello\"):\n"
        "        b = model.model.layers[1].output[0].clone().save()\n"
        "        lb = model.logits.save()\n";
    QCOMPARE(s_->run(batched), std::string());
    QCOMPARE(s_->tensor("a").size(0), int64_t(5 + 1));
    QCOMPARE(s_->tensor("la").size(0), int64_t(2));
    QCOMPARE(s_->tensor("b").size(0), int64_t(1));
    const at::Tensor lb = s_->tensor("lb"), la = s_->tensor("la");
    QCOMPARE(s_->run("with model.trace(\"Hello\"):\n    lb = model.logits.save()\n"),
             std::string());
    QVERIFY(test::closeToScale(lb, s_->tensor("lb")));  // invoke 1's write left invoke 2 alone
    QCOMPARE(s_->run("with model.trace(\"Hi\"):\n    l = model.logits.save()\n"), std::string());
    QVERIFY(!test::closeToScale(la.narrow(0, 1, 1), s_->tensor("l")));  // but wrote both its rows

    const char* stopped =
        "with model.trace([\"Hi\", \"Hello\"], max_tokens=10, ignore_eos=True) as tracer:\n"
        "    for i in tracer.iter[:]:\n"
        "        if i == 1:\n"
        "            tracer.stop()\n"
        "        x = model.logits\n"
        "    out = tracer.result.save()\n"
        "print(len(out), len(out[0].outputs[0].token_ids), len(out[1].outputs[0].token_ids))\n";
    QCOMPARE(s_->run(stopped), std::string());
    QCOMPARE(s_->lines, (std::vector<std::string>{"2 2 2"}));
  }

  // When one prompt of a batch ends, the invoke follows the rest: its rows shrink.
  void batchRowsShrinkAsPromptsEnd() {
    const char* script =
        "with model.trace([\"Hi\", \"Hello\"], max_tokens=4, stop_token_ids=[9625], "
        "ignore_eos=True) as tracer:\n"
        "    sizes = list().save()\n"
        "    for i in tracer.iter[:]:\n"
        "        sizes.append(model.logits.shape[0])\n"
        "        if i == 0:\n"
        "            model.samples[0] = 9625\n"
        "    out = tracer.result.save()\n"
        "print(sizes, out[0].outputs[0].token_ids, len(out[1].outputs[0].token_ids))\n";
    QCOMPARE(s_->run(script), std::string());
    QCOMPARE(s_->lines, (std::vector<std::string>{"[2, 1, 1, 1] [9625] 4"}));
  }

  void otherValuesAreRefusedWithTheForms_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    const auto trace = [](const QString& prompt) {
      return "from vllm import TokensPrompt\nwith model.trace(" + prompt +
             ") as tracer:\n    l = model.logits.save()\n";
    };
    QTest::newRow("float") << trace("3.5")
                           << "bad.py:3:1: the prompt is a value of type float (3.5)";
    QTest::newRow("None in a batch")
        << trace("[\"Hi\", None]") << "prompt 1 of the batch is a value of type NoneType (None)";
    QTest::newRow("unknown dict") << trace("{\"text\": \"Hi\"}")
                                  << "the prompt is a dict with keys 'text', which is none of the "
                                     "dict forms";
    QTest::newRow("ids mixed with prompts")
        << trace("[785, \"Hello\"]") << "the prompt list mixes token ids and prompts";
    QTest::newRow("batch of batches")
        << trace("[[\"Hi\", \"Hello\"]]")
        << "prompt 0 of the batch is a list that is not token ids: a batch holds prompts, not "
           "batches";
    QTest::newRow("empty list") << trace("[]") << "the prompt is an empty list";
    QTest::newRow("empty string") << trace("\"\"") << "the prompt '' has no tokens";
    QTest::newRow("float tensor") << trace("torch.ones(3)")
                                  << "the prompt must be a 1-D integer tensor, got a "
                                     "floating-point tensor of shape torch.Size([3])";
    QTest::newRow("mask of another length")
        << trace("{\"input_ids\": [785, 6722], \"attention_mask\": [1]}")
        << "attention_mask has 1 positions but input_ids has 2";
    QTest::newRow("mask of zeros")
        << trace("{\"input_ids\": [785, 6722], \"attention_mask\": [0, 0]}")
        << "attention_mask is all 0: the prompt keeps no token";
    QTest::newRow("rows of different counts")
        << trace("{\"input_ids\": [[785], [6722]], \"attention_mask\": [[1]]}")
        << "input_ids has 2 rows but attention_mask has 1";
    QTest::newRow("tokenizer output with other keys")
        << trace("{\"input_ids\": [785], \"token_type_ids\": [0]}")
        << "a tokenizer output got the key 'token_type_ids'; it takes attention_mask, input_ids";
    QTest::newRow("TokensPrompt with other keys")
        << trace("{\"prompt_token_ids\": [785], \"multi_modal_data\": None}")
        << "TokensPrompt got the key 'multi_modal_data'; it takes prompt_token_ids";
    QTest::newRow("TokensPrompt without ids")
        << trace("TokensPrompt([785])")
        << "bad.py:3:1: call it as TokensPrompt(prompt_token_ids=[785, 6722, 315])";
    QTest::newRow("named at the invoke")
        << "with model.trace() as tracer:\n    with tracer.invoke(\"Hi\"):\n        l = "
           "model.logits.save()\n    with tracer.invoke({\"ids\": [1]}):\n        m = "
           "model.logits.save()\n"
        << "bad.py:5:5: the prompt is a dict with keys 'ids', which is none of the dict forms";
    QTest::newRow("unknown import") << "from vllm import SamplingParams\n"
                                    << "bad.py:2:1: cannot import 'SamplingParams' from vllm";
  }
  void otherValuesAreRefusedWithTheForms() {
    QFETCH(QString, script);
    QFETCH(QString, message);
    const std::string e = s_->run(script.toStdString(), "bad.py");
    QVERIFY2(e.find(message.toStdString()) != std::string::npos, e.c_str());
    if (!message.contains("import") && !message.contains("call it as")) {
      QVERIFY2(e.find("a prompt is a string, a list of token ids") != std::string::npos,
               e.c_str());  // the forms that work
    }
    // The engine serves the next job.
    QCOMPARE(s_->run("with model.trace(\"Hi\"):\n    l = model.logits.save()\nprint(l.shape)\n"),
             std::string());
    QCOMPARE(s_->lines, (std::vector<std::string>{"torch.Size([1, 151936])"}));
  }

  // A name an earlier (or later) invoke has not assigned yet when this one uses it.
  void crossInvokeOrderingErrors_data() {
    QTest::addColumn<QString>("script");
    QTest::addColumn<QString>("message");
    QTest::newRow("assigned at a later layer")
        << "with model.trace() as tracer:\n"
           "    with tracer.invoke(\"The capital of France is\"):\n"
           "        h = model.model.layers[2].output[0][-1:].clone()\n"
           "    with tracer.invoke(\"Hello\"):\n"
           "        model.model.layers[1].output[0][-1:] = h\n"
        << "bad.py:6:48: name 'h' is not defined yet: it is assigned by invoke 1 (line 4) at "
           "model.model.layers[2].output, which the model reaches after "
           "model.model.layers[1].output, so invoke 2 cannot use it there (a cross-invoke "
           "ordering error";
    QTest::newRow("assigned by a later invoke at the same port")
        << "with model.trace() as tracer:\n"
           "    with tracer.invoke(\"Hello\"):\n"
           "        model.model.layers[1].output[0][-1:] = h\n"
           "    with tracer.invoke(\"The capital of France is\"):\n"
           "        h = model.model.layers[1].output[0][-1:].clone()\n"
        << "bad.py:4:48: name 'h' is not defined yet: it is assigned by invoke 2 (line 6) at "
           "model.model.layers[1].output, which is served to invoke 2 after invoke 1 (at one port "
           "invokes are served in order), so invoke 1 cannot use it there";
    QTest::newRow("used before the model runs")
        << "with model.trace() as tracer:\n"
           "    with tracer.invoke(\"Hi\"):\n"
           "        h = model.model.layers[2].output[0].clone()\n"
           "    with tracer.invoke(\"Hello\"):\n"
           "        g = h * 2\n"
        << "bad.py:6:13: name 'h' is not defined yet: it is assigned by invoke 1 (line 4) at "
           "model.model.layers[2].output at step 0, so invoke 2 cannot use it at the start of "
           "the trace, before the model runs";
    QTest::newRow("assigned at a later step")
        << "with model.trace(max_tokens=3) as tracer:\n"
           "    with tracer.invoke(\"Hi\"):\n"
           "        for i in tracer.iter[2]:\n"
           "            h = model.model.layers[0].output[0].clone()\n"
           "    with tracer.invoke(\"Hello\"):\n"
           "        model.model.layers[1].output[0][:] = h\n"
        << "bad.py:7:46: name 'h' is not defined yet: it is assigned by invoke 1 (line 5) at "
           "model.model.layers[0].output at step 2, which the model reaches after "
           "model.model.layers[1].output at step 0";
    QTest::newRow("never assigned")
        << "with model.trace() as tracer:\n"
           "    with tracer.invoke(\"Hi\"):\n"
           "        if False:\n"
           "            h = 1\n"
           "    with tracer.invoke(\"Hello\"):\n"
           "        model.model.layers[1].output[0][:] = h\n"
        << "bad.py:7:46: name 'h' is not defined: invoke 1 assigns it (line 5) but ended without "
           "running that line, so invoke 2 cannot use it";
    QTest::newRow("no invoke assigns it")
        << "with model.trace(\"Hi\"):\n    model.model.layers[1].output[0][:] = hh\n"
        << "bad.py:3:42: name 'hh' is not defined";
  }
  void crossInvokeOrderingErrors() {
    QFETCH(QString, script);
    QFETCH(QString, message);
    const std::string e = s_->run(script.toStdString(), "bad.py");
    QVERIFY2(e.find(message.toStdString()) != std::string::npos, e.c_str());
  }
};

QTEST_GUILESS_MAIN(TestPromptForms)
#include "tst_prompt_forms.moc"
