// Tokenizer against the reference JS encoder: golden ids for 240 strings with the real Qwen3,
// Llama 3 and DeepSeek-V3 tokenizer.json files (fetched by scripts/fetch-assets), round trips,
// ids without a token (decoded as no text, shown as a marker), and the errors for bad input and
// unsupported components.
#include <QtTest>

#include <fstream>
#include <nlohmann/json.hpp>

#include "common/test_support.h"
#include "core/error.h"
#include "core/model/model_source.h"
#include "core/model/tokenizer.h"
#include "core/model/unicode_text.h"

using namespace shardscope;

namespace {

std::filesystem::path assetTokenizer(const std::string& name) {
  return cacheDir() / "assets" / ("tokenizer-" + name + "-3.7.2") / "tokenizer.json";
}

const nlohmann::json& golden() {
  static const nlohmann::json j = [] {
    nlohmann::json g;
    std::ifstream(test::sourceDir() / "tests" / "golden" / "tokenizer" / "golden.json") >> g;
    return g;
  }();
  return j;
}

std::string describeMismatch(const std::vector<int64_t>& got, const std::vector<int64_t>& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return "first mismatch at index " + std::to_string(i) + " (got " + std::to_string(got.size()) +
         " ids, want " + std::to_string(want.size()) + ")";
}

// A minimal tokenizer.json with a configurable component, for error and template tests.
std::string tinyTokenizer(const std::string& extra) {
  return R"({"version": "1.0", "added_tokens": [{"id": 5, "content": "<s>", "single_word": false,
    "lstrip": false, "rstrip": false, "normalized": false, "special": true}],
    "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
    "decoder": {"type": "ByteLevel"},
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}, "merges": [["a", "b"], ["Ġ", "ab"]]})" +
         extra + "}";
}

// Raw strings stay out of the test class: moc cannot parse them inside class bodies.
constexpr const char* kBosTemplate = R"(, "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [5], "tokens": ["<s>"]}}})";

// The special token at id 7 leaves ids 5 and 6 without a token.
constexpr const char* kAddedAtSeven = R"(, "added_tokens": [{"id": 7, "content": "<s>",
    "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}])";

struct BadTokenizer {
  const char* name;
  std::string json;
  std::string message;
};

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  return s.replace(s.find(from), from.size(), to);
}

std::vector<BadTokenizer> badTokenizers() {
  return {
      {"normalizer", tinyTokenizer(R"(, "normalizer": {"type": "Lowercase"})"),
       "normalizer: type 'Lowercase' is not supported (supported: NFC"},
      {"decoder",
       replaced(tinyTokenizer(""), R"({"type": "ByteLevel"})", R"({"type": "WordPiece"})"),
       "decoder: type 'WordPiece' is not supported"},
      {"model", R"({"model": {"type": "Unigram", "vocab": []}})",
       "model: type 'Unigram' is not supported"},
      {"pre_tokenizer", tinyTokenizer(R"(, "pre_tokenizer": {"type": "Whitespace"})"),
       "pre_tokenizer: type 'Whitespace' is not supported"},
      {"post_processor", tinyTokenizer(R"(, "post_processor": {"type": "BertProcessing"})"),
       "post_processor: type 'BertProcessing' is not supported"},
      {"bad regex",
       tinyTokenizer(
           R"(, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}, "behavior": "Isolated"})"),
       "regex does not compile"},
      {"merge outside vocabulary", replaced(tinyTokenizer(""), R"(["a", "b"],)", R"(["a", "zz"],)"),
       "merge 'a zz' uses a token that is not in the vocabulary"},
      {"not json", "{\"model\": ", "not valid JSON"},
      {"no model", "{}", "not a tokenizer.json"},
      {"malformed vocab", R"({"model": {"type": "BPE", "vocab": {"a": "x"}, "merges": []}})",
       "model BPE vocab: token id \"x\" is not an integer in [0, 4194303]"},
      {"negative id", R"({"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}})",
       "model BPE vocab: token id -1 is not an integer"},
      {"id past the limit", R"({"model": {"type": "BPE", "vocab": {"a": 4194304}, "merges": []}})",
       "model BPE vocab: token id 4194304 is not an integer"},
      {"fractional added id",
       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "added_tokens": [{"id": 1e30, "content": "<x>"}]})",
       "added_tokens: token id 1e+30 is not an integer"},
      {"malformed field",
       R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
           "added_tokens": [{"id": 0, "content": 5}]})",
       "malformed tokenizer.json"},
  };
}

}  // namespace

class TestTokenizer : public QObject {
  Q_OBJECT
 private Q_SLOTS:
  void initTestCase() {
    for (const char* name : {"qwen3", "llama3", "deepseek_v3"}) {
      if (!std::filesystem::exists(assetTokenizer(name))) {
        QFAIL(("missing " + assetTokenizer(name).string() +
               ": run scripts/setup (or scripts/fetch-assets)")
                  .c_str());
      }
    }
    QVERIFY(golden()["cases"].size() >= 200);
  }

  void matchesReferenceEncoder_data() {
    QTest::addColumn<QString>("name");
    QTest::newRow("qwen3") << "qwen3";
    QTest::newRow("llama3") << "llama3";
    QTest::newRow("deepseek_v3") << "deepseek_v3";
  }
  void matchesReferenceEncoder() {
    QFETCH(QString, name);
    const auto tok = Tokenizer::fromFile(assetTokenizer(name.toStdString()));
    int checked = 0;
    for (const auto& c : golden()["cases"]) {
      const std::string text = c["text"];
      const auto want = c[name.toStdString()].get<std::vector<int64_t>>();
      const auto got = tok->encode(text);
      if (got != want) {
        QFAIL(("text " + nlohmann::json(text).dump() + ": " + describeMismatch(got, want)).c_str());
      }
      // Qwen3 normalises to NFC, so its round trip gives the NFC form of the text.
      const std::string expected = name == "qwen3" ? normalizeUnicode(text, NormalForm::NFC) : text;
      const std::string back = tok->decode(got);
      if (back != expected)
        QFAIL(("decode(encode(s)) != s for " + nlohmann::json(text).dump()).c_str());
      ++checked;
    }
    QVERIFY(checked >= 200);
  }

  void capitalOfFranceInQwen3() {
    const auto tok = Tokenizer::fromFile(assetTokenizer("qwen3"));
    QCOMPARE(tok->encode("The capital of France is"),
             (std::vector<int64_t>{785, 6722, 315, 9625, 374}));
    QCOMPARE(tok->tokenPiece(9625), std::string(" France"));
    QVERIFY(tok->isSpecial(151643));
    QCOMPARE(tok->decode({785, 151643, 6722}, /*skipSpecialTokens=*/true),
             std::string("The capital"));
  }

  // Qwen3's LM head has 151936 rows, its tokenizer 151669 ids: a sampled id past the tokenizer
  // decodes to no text (as in Hugging Face and vLLM) and shows as a marker where people read it.
  void idsWithoutATokenDecodeToNothing() {
    const auto tok = Tokenizer::fromFile(assetTokenizer("qwen3"));
    QCOMPARE(tok->vocabSize(), int64_t(151669));
    QVERIFY(tok->hasToken(151668));
    QVERIFY(!tok->hasToken(151669));
    QVERIFY(!tok->hasToken(151691));
    QVERIFY(!tok->hasToken(-1));
    QCOMPARE(tok->decode({785, 151691, 6722}), std::string("The capital"));
    QCOMPARE(tok->decode({151935}), std::string());
    QCOMPARE(tok->displayText({785, 151691, 6722}), std::string("The<|id 151691|> capital"));
    QCOMPARE(tok->displayText({785, 151643, 151691}, /*skipSpecialTokens=*/true),
             std::string("The<|id 151691|>"));
    QCOMPARE(tok->tokenPiece(151691), std::string("<|id 151691|>"));
    QCOMPARE(Tokenizer::unknownIdMarker(151691), std::string("<|id 151691|>"));
    QCOMPARE(tok->displayText({785, 6722}), tok->decode({785, 6722}));
    try {
      tok->tokenText(151691);
      QFAIL("expected an error");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("151691 has no token") != std::string::npos, e.what());
    }
    try {
      tok->decode({785, -1});
      QFAIL("expected an error");
    } catch (const Error& e) {
      QVERIFY2(std::string(e.what()).find("token ids are never negative") != std::string::npos,
               e.what());
    }
  }

  // Ids between the vocabulary and an added token are holes: no text, a marker for people.
  void holesInTheIdsDecodeToNothing() {
    const auto tok = Tokenizer::fromJson(tinyTokenizer(kAddedAtSeven), "tiny");
    QCOMPARE(tok->vocabSize(), int64_t(8));
    QVERIFY(!tok->hasToken(5) && !tok->hasToken(6) && tok->hasToken(7));
    QCOMPARE(tok->decode({2, 6, 7, 4}), std::string("ab<s> ab"));
    QCOMPARE(tok->decode({2, 6, 7, 4}, /*skipSpecialTokens=*/true), std::string("ab ab"));
    QCOMPARE(tok->displayText({2, 6, 7, 4}, true), std::string("ab<|id 6|> ab"));
    QCOMPARE(tok->displayText({9}), std::string("<|id 9|>"));
  }

  void invalidUtf8IsAnError() {
    const auto tok = Tokenizer::fromFile(assetTokenizer("qwen3"));
    try {
      tok->encode(std::string("ok \xff\xfe bad"));
      QFAIL("expected an error");
    } catch (const Error& e) {
      QVERIFY(std::string(e.what()).find("not valid UTF-8 at byte offset 3") != std::string::npos);
    }
    QVERIFY_THROWS_EXCEPTION(Error, tok->encode(std::string("\xe2\x82")));      // cut mid-character
    QVERIFY_THROWS_EXCEPTION(Error, tok->encode(std::string("\xed\xa0\x80")));  // a surrogate
  }

  void decodingAPartialCharacterGivesReplacement() {
    const auto tok = Tokenizer::fromFile(assetTokenizer("qwen3"));
    const auto ids = tok->encode("€");  // three bytes; take the first token alone
    QVERIFY(!ids.empty());
    const std::string s = tok->decode({ids[0]});
    QVERIFY(s == "€" || s.find("\xEF\xBF\xBD") != std::string::npos);
  }

  void templateProcessingAddsBos() {
    const auto tok = Tokenizer::fromJson(tinyTokenizer(kBosTemplate), "tiny");
    QCOMPARE(tok->encode("ab ab"), (std::vector<int64_t>{5, 2, 4}));
    QCOMPARE(tok->encode("ab ab", /*addSpecialTokens=*/false), (std::vector<int64_t>{2, 4}));
    QCOMPARE(tok->encode("ab<s>ab", false), (std::vector<int64_t>{2, 5, 2}));
    QCOMPARE(tok->decode({5, 2, 4}, true), std::string("ab ab"));
  }

  void unsupportedComponentsAreNamed_data() {
    QTest::addColumn<QString>("json");
    QTest::addColumn<QString>("message");
    for (const auto& c : badTokenizers()) {
      QTest::newRow(c.name) << QString::fromStdString(c.json) << QString::fromStdString(c.message);
    }
  }
  void unsupportedComponentsAreNamed() {
    QFETCH(QString, json);
    QFETCH(QString, message);
    try {
      // Later keys override earlier ones in nlohmann's parser, so appended fields replace defaults.
      Tokenizer::fromJson(json.toStdString(), "test.json");
      QFAIL("expected an error");
    } catch (const Error& e) {
      const std::string what = e.what();
      QVERIFY2(what.find(message.toStdString()) != std::string::npos, what.c_str());
      QVERIFY2(what.find("test.json") != std::string::npos, what.c_str());
    }
  }
};

QTEST_GUILESS_MAIN(TestTokenizer)
#include "tst_tokenizer.moc"
