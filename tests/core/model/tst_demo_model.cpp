// The built-in demo model has learned something (issue 19), checked through the Engine on the CPU
// at tp=2: its loss on held-out English text is well under a unigram model's and matches what
// transformers computed on the GPU after training; on a random token sequence repeated twice the
// second copy's loss is at most half the first's, and a head's attention pattern (the attention
// view's data: rotary_emb's q and k, ui::attentionPattern) puts most weight on the token after
// the previous occurrence; its tokenizer gives the `tokenizers` package's ids. The reference
// numbers come from resources/demo-model/train_model.py (tests/golden/demo-model/).
#include <QtTest>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/script_run.h"
#include "core/file_tree.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/parallel/head_layout.h"
#include "ui/result_math.h"

using namespace shardscope;

namespace {

const std::string kGolden = std::string(SHARDSCOPE_SOURCE_DIR) + "/tests/golden/demo-model/";
constexpr int64_t kContext = 512;  // the training context; the held-out loss is taken per chunk
constexpr uint64_t kProbeSeed = 20261130;
constexpr int64_t kProbeLength = 48;
constexpr int64_t kLayers = 4;
constexpr int kTp = 2;

nlohmann::json golden(const std::string& name) {
  return nlohmann::json::parse(readFile(kGolden + name));
}

// The induction probe of train_model.py: a 64-bit LCG's tokens, the sequence twice.
std::vector<int64_t> probeTokens(int64_t vocabWithoutSpecial) {
  std::vector<int64_t> ids;
  uint64_t x = kProbeSeed;
  for (int64_t i = 0; i < kProbeLength; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    ids.push_back(int64_t((x >> 33) % uint64_t(vocabWithoutSpecial)));
  }
  ids.insert(ids.end(), ids.begin(), ids.end());
  return ids;
}

std::string idList(const std::vector<int64_t>& ids, size_t from, size_t to) {
  std::ostringstream s;
  s << "[";
  for (size_t i = from; i < to; ++i) s << (i > from ? ", " : "") << ids[i];
  s << "]";
  return s.str();
}

// Every position's logits, gathered: the last layer's residual stream through the final norm and
// the LM head (the logit lens example's path), `[T, V]` saved as `name`.
std::string allLogits(const std::string& name) {
  return "    " + name +
         " = model.logits_processor(model.lm_head, model.model.norm(sum(model.model" + ".layers[" +
         std::to_string(kLayers - 1) + "].output))).save()\n";
}

// Runs `body` after loading the demo model at tp=2 (the GUI's default; faster on 2 cores).
test::ScriptRun runOnDemo(const std::string& body) {
  test::ScriptRun run;
  trace::RunOptions o;
  o.dtype = DType::F32;
  o.out = run.printTo();
  o.note = [](const std::string&) {};
  run.runner = std::make_unique<trace::ScriptRunner>(o);
  try {
    run.runner->run(
        "model = VLLM(\"demo\", tensor_parallel_size=" + std::to_string(kTp) + ")\n" + body,
        "demo_model.py");
  } catch (const std::exception& e) {
    qWarning("%s", e.what());
  }
  return run;
}

// -log p(ids[t+1] | ids[..t]) for t in [from, to), from logits [T, V] of `ids`.
std::vector<double> nextTokenLosses(const at::Tensor& logits, const std::vector<int64_t>& ids,
                                    int64_t from, int64_t to) {
  const auto logp = at::log_softmax(logits.to(at::kDouble), -1);
  std::vector<double> out;
  for (int64_t t = from; t < to; ++t) out.push_back(-logp[t][ids[size_t(t + 1)]].item<double>());
  return out;
}

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// Columns [start, start + size) of a matrix.
ui::Matrix columns(const ui::Matrix& m, HeadColumns c) {
  ui::Matrix out{m.rows, c.size, {}};
  for (int64_t r = 0; r < m.rows; ++r)
    for (int64_t j = 0; j < c.size; ++j) out.data.push_back(m.at(r, c.start + j));
  return out;
}

}  // namespace

class TestDemoModel : public QObject {
  Q_OBJECT

 private Q_SLOTS:
  void initTestCase() {
    const auto dir = demoModelDir();
    tokenizer_ = Tokenizer::fromFile(dir / "tokenizer.json");
    const auto config = nlohmann::json::parse(readFile(dir / "config.json"));
    QCOMPARE(config.at("num_hidden_layers").get<int64_t>(), kLayers);
    heads_ = HeadLayout(config.at("num_attention_heads").get<int64_t>(),
                        config.at("num_key_value_heads").get<int64_t>(),
                        config.at("head_dim").get<int64_t>(), kTp);
    endOfText_ = *tokenizer_->tokenId("<|endoftext|>");
  }

  // Our tokenizer against the `tokenizers` package, id for id, on the held-out sample, its
  // paragraphs and edge cases (regex edges, NFC, bytes above ASCII, the special token).
  void tokenizerGivesTheReferenceIds() {
    const auto cases = golden("tokenizer_ids.json").at("cases");
    QVERIFY(cases.size() > 40);
    for (const auto& c : cases) {
      const auto text = c.at("text").get<std::string>();
      const auto ids = tokenizer_->encode(text, false);
      QVERIFY2(ids == c.at("ids").get<std::vector<int64_t>>(), text.substr(0, 80).c_str());
      QCOMPARE(tokenizer_->decode(ids), c.at("decoded").get<std::string>());
    }
  }

  // Mean next-token loss on the held-out sample, chunk by chunk as train_model.py takes it: well
  // under the unigram model of the training split's token counts (add-one smoothed), and equal to
  // the loss transformers computed for the same ids.
  void heldOutLossIsWellUnderUnigram() {
    const auto ids = tokenizer_->encode(readFile(kGolden + "heldout-sample.txt"), false);
    const auto reference = golden("reference.json");
    std::string body;
    std::vector<std::pair<size_t, size_t>> chunks;
    for (size_t start = 0; start + 1 < ids.size(); start += kContext) {
      const size_t end = std::min(ids.size(), start + size_t(kContext));
      chunks.push_back({start, end});
      body += "with model.trace(" + idList(ids, start, end) + ", max_tokens=1):\n" +
              allLogits("logits_" + std::to_string(chunks.size() - 1));
    }
    const auto run = runOnDemo(body);
    std::vector<double> losses;
    for (size_t i = 0; i < chunks.size(); ++i) {
      const auto logits = run.tensor("logits_" + std::to_string(i));
      QVERIFY(logits.defined());
      const std::vector<int64_t> chunk(ids.begin() + long(chunks[i].first),
                                       ids.begin() + long(chunks[i].second));
      QCOMPARE(logits.size(0), int64_t(chunk.size()));
      const auto l = nextTokenLosses(logits, chunk, 0, int64_t(chunk.size()) - 1);
      losses.insert(losses.end(), l.begin(), l.end());
    }
    QCOMPARE(int64_t(losses.size()), reference.at("sample_tokens").get<int64_t>());
    const double loss = mean(losses);

    const auto counts = golden("unigram_counts.json").get<std::vector<double>>();
    double total = 0;
    for (double c : counts) total += c;
    std::vector<double> unigram;
    for (size_t t = 1; t < ids.size(); ++t)
      unigram.push_back(-std::log((counts[size_t(ids[t])] + 1) / (total + double(counts.size()))));
    const double unigramLoss = mean(unigram);
    qInfo("held-out sample: %zu tokens, loss %.4f nats, unigram %.4f nats (transformers: %.4f)",
          losses.size(), loss, unigramLoss, reference.at("sample_loss").get<double>());
    QVERIFY2(loss < 0.7 * unigramLoss,
             qPrintable(QString("loss %1 vs unigram %2").arg(loss).arg(unigramLoss)));
    QVERIFY(std::abs(unigramLoss - reference.at("sample_unigram_loss").get<double>()) <
            1e-6 * unigramLoss);
    QVERIFY2(std::abs(loss - reference.at("sample_loss").get<double>()) < 0.01 * loss,
             qPrintable(QString("ours %1, transformers %2")
                            .arg(loss)
                            .arg(reference.at("sample_loss").get<double>())));
  }

  // Induction: the probe's second copy is predicted (loss at most half the first copy's), and
  // some head attends from each token of the second copy to the token after its first
  // occurrence with most of its weight.
  void inductionHeadPredictsTheRepeat() {
    const auto ids = probeTokens(endOfText_);
    const int64_t L = kProbeLength;
    std::string body = "with model.trace(" + idList(ids, 0, ids.size()) + ", max_tokens=1):\n";
    for (int64_t l = 0; l < kLayers; ++l) {
      const std::string n = std::to_string(l);
      body += "    qk" + n + " = model.model.layers[" + n + "].self_attn.rotary_emb.output\n" +
              "    q" + n + " = qk" + n + "[0].save()\n    k" + n + " = qk" + n + "[1].save()\n";
    }
    body += allLogits("logits");
    const auto run = runOnDemo(body);
    const auto logits = run.tensor("logits");
    QVERIFY(logits.defined());
    const double first = mean(nextTokenLosses(logits, ids, 0, L - 1));
    const double second = mean(nextTokenLosses(logits, ids, L, 2 * L - 1));
    const auto reference = golden("reference.json").at("induction");
    qInfo("probe loss: first copy %.3f, second copy %.3f (transformers: %.3f, %.3f)", first, second,
          reference.at("first_copy_loss").get<double>(),
          reference.at("second_copy_loss").get<double>());
    QVERIFY2(second <= 0.5 * first, qPrintable(QString("%1 vs %2").arg(second).arg(first)));

    double bestScore = -1;
    int64_t bestLayer = -1, bestHead = -1;
    for (int64_t l = 0; l < kLayers; ++l) {
      const auto q = ui::asMatrix(*run.runner->tensorValue("q" + std::to_string(l)));
      const auto k = ui::asMatrix(*run.runner->tensorValue("k" + std::to_string(l)));
      for (int64_t h = 0; h < heads_.numHeads(HeadPart::Query); ++h) {
        const auto pattern = ui::attentionPattern(columns(q, heads_.rotaryQueryColumns(h)),
                                                  columns(k, heads_.rotaryKeyColumnsFor(h)));
        double score = 0;
        for (int64_t i = L; i < 2 * L; ++i) score += pattern.at(i, i - L + 1);
        score /= double(L);
        if (score > bestScore) std::tie(bestScore, bestLayer, bestHead) = {score, l, h};
      }
    }
    qInfo(
        "induction head: layer %lld head %lld, mean weight %.3f on the token after the "
        "previous occurrence (transformers' best: layer %d head %d, %.3f)",
        static_cast<long long>(bestLayer), static_cast<long long>(bestHead), bestScore,
        reference.at("heads")[0].at("layer").get<int>(),
        reference.at("heads")[0].at("head").get<int>(),
        reference.at("heads")[0].at("score").get<double>());
    QVERIFY2(bestScore > 0.5, qPrintable(QString("best head's weight %1").arg(bestScore)));
    QCOMPARE(bestLayer, reference.at("heads")[0].at("layer").get<int64_t>());
    QCOMPARE(bestHead, reference.at("heads")[0].at("head").get<int64_t>());
  }

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  HeadLayout heads_;
  int64_t endOfText_ = 0;
};

QTEST_GUILESS_MAIN(TestDemoModel)
#include "tst_demo_model.moc"
