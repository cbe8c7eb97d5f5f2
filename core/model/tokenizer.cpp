#include "tokenizer.h"

#include <algorithm>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <variant>

#include "../error.h"
#include "../file_tree.h"
#include "pre_tokenizer.h"
#include "unicode_text.h"

namespace shardscope {
namespace {

using nlohmann::json;

struct AddedToken {
  int64_t id;
  std::string content;
  bool special, lstrip, rstrip, normalized;
};

// One item of a TemplateProcessing "single" template: fixed ids, or the sequence itself.
struct TemplateItem {
  std::vector<int64_t> ids;
  bool sequence = false;
};

std::string where(const std::string& origin, const std::string& component) {
  return origin + ", " + component;
}

// Ids index a dense table up to the largest one, so they are bounded: 4M is 16 times the largest
// vocabulary published (262,144). Hugging Face stores ids as u32.
constexpr int64_t kMaxTokenId = (int64_t(1) << 22) - 1;

int64_t tokenIdOf(const json& v, const std::string& where) {
  if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > kMaxTokenId) ||
      v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxTokenId) {
    throw Error(where + ": token id " + v.dump() + " is not an integer in [0, " +
                std::to_string(kMaxTokenId) + "]");
  }
  return v.get<int64_t>();
}

[[noreturn]] void unsupported(const std::string& origin, const std::string& component,
                              const std::string& type, const std::string& supported) {
  throw Error(where(origin, component) + ": type '" + type +
              "' is not supported (supported: " + supported + ")");
}

}  // namespace

struct Tokenizer::Impl {
  std::string origin;
  std::vector<NormalForm> normalizers;
  std::vector<PreTokenizerStep> preTokenizers;
  std::shared_ptr<PreTokenizerRegex> gpt2;

  // BPE model
  std::unordered_map<std::string, int64_t> vocab;
  std::vector<std::string> idToToken;
  // Per id below idToToken.size(): kHole (no token), kVocab, or the index of its added token. One
  // flat lookup a token: decoding runs right after a forward has evicted the caches.
  static constexpr int32_t kHole = -2, kVocab = -1;
  std::vector<int32_t> entry;
  std::unordered_map<uint64_t, std::pair<int32_t, int64_t>>
      merges;  // (left, right) -> (rank, merged)
  bool ignoreMerges = false;
  std::optional<int64_t> unkId;

  std::vector<AddedToken> added;
  const AddedToken* addedToken(int64_t id) const {
    return entry[size_t(id)] >= 0 ? &added[size_t(entry[size_t(id)])] : nullptr;
  }
  std::array<std::vector<size_t>, 256> addedByFirstByte;  // indices into added, longest first

  std::vector<TemplateItem> singleTemplate;
  bool byteLevelDecoder = false;

  mutable std::mutex cacheMutex;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache;

  void parseNormalizer(const json& j);
  void parsePreTokenizer(const json& j);
  void parseModel(const json& j);
  void parseAddedTokens(const json& j);
  void parsePostProcessor(const json& j);
  void parseDecoder(const json& j);

  void encodeText(std::string_view text, std::vector<int64_t>& out) const;
  void encodeWord(const std::string& word, std::vector<int64_t>& out) const;
  int64_t symbolId(const std::string& s) const;
};

void Tokenizer::Impl::parseNormalizer(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& n : j.at("normalizers")) parseNormalizer(n);
  } else if (type == "NFC") {
    normalizers.push_back(NormalForm::NFC);
  } else if (type == "NFD") {
    normalizers.push_back(NormalForm::NFD);
  } else if (type == "NFKC") {
    normalizers.push_back(NormalForm::NFKC);
  } else if (type == "NFKD") {
    normalizers.push_back(NormalForm::NFKD);
  } else {
    unsupported(origin, "normalizer", type, "NFC, NFD, NFKC, NFKD, Sequence");
  }
}

void Tokenizer::Impl::parsePreTokenizer(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& p : j.at("pretokenizers")) parsePreTokenizer(p);
  } else if (type == "Split") {
    if (j.value("invert", false))
      throw Error(where(origin, "pre_tokenizer Split") + ": invert=true is not supported");
    const json& pattern = j.at("pattern");
    const bool literal = pattern.contains("String");
    const std::string text =
        literal ? pattern.at("String").get<std::string>() : pattern.at("Regex").get<std::string>();
    const std::string behavior = j.value("behavior", "Isolated");
    SplitBehavior b;
    if (behavior == "Isolated")
      b = SplitBehavior::Isolated;
    else if (behavior == "Removed")
      b = SplitBehavior::Removed;
    else if (behavior == "MergedWithPrevious")
      b = SplitBehavior::MergedWithPrevious;
    else if (behavior == "MergedWithNext")
      b = SplitBehavior::MergedWithNext;
    else if (behavior == "Contiguous")
      b = SplitBehavior::Contiguous;
    else
      unsupported(origin, "pre_tokenizer Split behavior", behavior,
                  "Isolated, Removed, MergedWithPrevious, MergedWithNext, Contiguous");
    preTokenizers.push_back(SplitStep{
        std::make_shared<PreTokenizerRegex>(text, literal, where(origin, "pre_tokenizer Split")),
        b});
  } else if (type == "ByteLevel") {
    preTokenizers.push_back(
        ByteLevelStep{j.value("add_prefix_space", false), j.value("use_regex", true)});
  } else {
    unsupported(origin, "pre_tokenizer", type, "Split, ByteLevel, Sequence");
  }
}

void Tokenizer::Impl::parseModel(const json& j) {
  const std::string type = j.value("type", "");
  if (type != "BPE") unsupported(origin, "model", type, "BPE");
  const auto nonEmpty = [&](const char* key) {
    return j.contains(key) && j[key].is_string() && !j[key].get<std::string>().empty();
  };
  if (nonEmpty("continuing_subword_prefix") || nonEmpty("end_of_word_suffix")) {
    throw Error(
        where(origin, "model BPE") +
        ": continuing_subword_prefix / end_of_word_suffix are not supported (byte-level BPE only)");
  }
  if (j.value("byte_fallback", false))
    throw Error(where(origin, "model BPE") + ": byte_fallback is not supported");
  ignoreMerges = j.value("ignore_merges", false);
  for (const auto& [token, id] : j.at("vocab").items()) {
    const int64_t i = tokenIdOf(id, where(origin, "model BPE vocab"));
    vocab.emplace(token, i);
    if (i < 0)
      throw Error(where(origin, "model BPE vocab") + ": '" + token + "' has a negative id");
    if (i >= int64_t(idToToken.size())) {
      idToToken.resize(i + 1);
      entry.resize(i + 1, kHole);
    }
    idToToken[i] = token;
    if (entry[size_t(i)] == kHole) entry[size_t(i)] = kVocab;
  }
  if (j.contains("unk_token") && j["unk_token"].is_string()) {
    auto it = vocab.find(j["unk_token"].get<std::string>());
    if (it != vocab.end()) unkId = it->second;
  }
  int32_t rank = 0;
  for (const auto& m : j.at("merges")) {
    std::string left, right;
    if (m.is_string()) {
      const std::string s = m.get<std::string>();
      const auto space = s.find(' ', 1);
      if (space == std::string::npos)
        throw Error(where(origin, "model BPE merges") + ": bad merge '" + s + "'");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (m.is_array() && m.size() == 2) {
      left = m[0].get<std::string>();
      right = m[1].get<std::string>();
    } else {
      throw Error(where(origin, "model BPE merges") + ": a merge must be \"a b\" or [a, b]");
    }
    auto l = vocab.find(left), r = vocab.find(right), merged = vocab.find(left + right);
    if (l == vocab.end() || r == vocab.end() || merged == vocab.end()) {
      throw Error(where(origin, "model BPE merges") + ": merge '" + left + " " + right +
                  "' uses a token that is not in the vocabulary");
    }
    merges.emplace(uint64_t(l->second) << 32 | uint64_t(r->second),
                   std::make_pair(rank++, merged->second));
  }
}

void Tokenizer::Impl::parseAddedTokens(const json& j) {
  if (j.is_null()) return;
  for (const auto& t : j) {
    AddedToken a{tokenIdOf(t.at("id"), where(origin, "added_tokens")),
                 t.at("content").get<std::string>(),
                 t.value("special", false),
                 t.value("lstrip", false),
                 t.value("rstrip", false),
                 t.value("normalized", false)};
    if (t.value("single_word", false)) {
      throw Error(where(origin, "added_tokens") + ": '" + a.content +
                  "' has single_word=true, which is not supported");
    }
    if (a.content.empty()) throw Error(where(origin, "added_tokens") + ": an added token is empty");
    if (a.id < 0)
      throw Error(where(origin, "added_tokens") + ": '" + a.content + "' has a negative id");
    if (a.id >= int64_t(idToToken.size())) {
      idToToken.resize(a.id + 1);
      entry.resize(a.id + 1, kHole);
    }
    entry[size_t(a.id)] = int32_t(added.size());
    added.push_back(std::move(a));
  }
  for (size_t i = 0; i < added.size(); ++i)
    addedByFirstByte[uint8_t(added[i].content[0])].push_back(i);
  for (auto& list : addedByFirstByte) {
    std::stable_sort(list.begin(), list.end(), [&](size_t a, size_t b) {
      return added[a].content.size() > added[b].content.size();
    });
  }
}

void Tokenizer::Impl::parsePostProcessor(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type == "ByteLevel") return;  // offsets only; ids unchanged
  if (type == "Sequence") {
    for (const auto& p : j.at("processors")) parsePostProcessor(p);
    return;
  }
  if (type != "TemplateProcessing")
    unsupported(origin, "post_processor", type, "TemplateProcessing, ByteLevel, Sequence");
  const json& specials = j.value("special_tokens", json::object());
  for (const auto& item : j.at("single")) {
    if (item.contains("Sequence")) {
      singleTemplate.push_back({{}, true});
      continue;
    }
    const std::string name = item.at("SpecialToken").at("id").get<std::string>();
    if (!specials.contains(name)) {
      throw Error(where(origin, "post_processor TemplateProcessing") + ": special token '" + name +
                  "' is not defined");
    }
    std::vector<int64_t> ids;
    for (const auto& id : specials[name].at("ids"))
      ids.push_back(tokenIdOf(id, where(origin, "post_processor TemplateProcessing")));
    singleTemplate.push_back({std::move(ids), false});
  }
}

void Tokenizer::Impl::parseDecoder(const json& j) {
  if (j.is_null()) return;
  const std::string type = j.value("type", "");
  if (type != "ByteLevel") unsupported(origin, "decoder", type, "ByteLevel");
  byteLevelDecoder = true;
}

int64_t Tokenizer::Impl::symbolId(const std::string& s) const {
  auto it = vocab.find(s);
  if (it != vocab.end()) return it->second;
  if (unkId) return *unkId;
  throw Error(origin + ": symbol '" + s +
              "' is not in the vocabulary and the model has no unk_token");
}

void Tokenizer::Impl::encodeWord(const std::string& word, std::vector<int64_t>& out) const {
  if (ignoreMerges) {
    if (auto it = vocab.find(word); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= 256;
  if (cacheable) {
    std::lock_guard lock(cacheMutex);
    if (auto it = cache.find(word); it != cache.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> symbols;
  for (size_t i = 0; i < word.size();) {
    size_t n = 1;
    while (i + n < word.size() && (uint8_t(word[i + n]) & 0xC0) == 0x80) ++n;
    symbols.push_back(symbolId(word.substr(i, n)));
    i += n;
  }
  // Repeatedly merge the lowest-ranked adjacent pair (leftmost on ties), as HF's BPE does.
  while (symbols.size() > 1) {
    int32_t bestRank = INT32_MAX;
    size_t best = 0;
    int64_t merged = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      auto it = merges.find(uint64_t(symbols[i]) << 32 | uint64_t(symbols[i + 1]));
      if (it != merges.end() && it->second.first < bestRank) {
        bestRank = it->second.first;
        best = i;
        merged = it->second.second;
      }
    }
    if (bestRank == INT32_MAX) break;
    symbols[best] = merged;
    symbols.erase(symbols.begin() + best + 1);
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  if (cacheable) {
    std::lock_guard lock(cacheMutex);
    if (cache.size() > 200000) cache.clear();
    cache.emplace(word, std::move(symbols));
  }
}

void Tokenizer::Impl::encodeText(std::string_view text, std::vector<int64_t>& out) const {
  if (text.empty()) return;
  std::string normalized(text);
  for (NormalForm f : normalizers) normalized = normalizeUnicode(normalized, f);
  std::vector<std::string> pieces{normalized};
  bool mapped = false;  // byte-level mapping done
  for (const auto& step : preTokenizers) {
    std::vector<std::string> next;
    if (const auto* split = std::get_if<SplitStep>(&step)) {
      for (const auto& p : pieces) {
        for (auto& s : splitPiece(p, *split)) next.push_back(std::move(s));
      }
    } else {
      const auto& bl = std::get<ByteLevelStep>(step);
      for (auto p : pieces) {
        if (bl.addPrefixSpace && (p.empty() || p[0] != ' ')) p.insert(p.begin(), ' ');
        std::vector<std::string> sub = bl.useRegex
                                           ? splitPiece(p, SplitStep{gpt2, SplitBehavior::Isolated})
                                           : std::vector<std::string>{p};
        for (const auto& s : sub) next.push_back(bytesToByteLevel(s));
      }
      mapped = true;
    }
    pieces = std::move(next);
  }
  for (const auto& p : pieces) {
    if (p.empty()) continue;
    encodeWord(mapped ? p : bytesToByteLevel(p), out);
  }
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::shared_ptr<const Tokenizer> Tokenizer::fromFile(const std::filesystem::path& path) {
  return fromJson(readFile(path), path.string());
}

std::shared_ptr<const Tokenizer> Tokenizer::fromJson(const std::string& text,
                                                     const std::string& origin) {
  auto impl = std::make_unique<Impl>();
  impl->origin = origin;
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  try {
    if (!j.is_object() || !j.contains("model"))
      throw Error(origin + ": not a tokenizer.json (no 'model')");
    impl->gpt2 = std::make_shared<PreTokenizerRegex>(kGpt2Pattern, false, "ByteLevel pattern");
    impl->parseNormalizer(j.value("normalizer", json()));
    impl->parsePreTokenizer(j.value("pre_tokenizer", json()));
    impl->parseModel(j.at("model"));
    impl->parseAddedTokens(j.value("added_tokens", json()));
    impl->parsePostProcessor(j.value("post_processor", json()));
    impl->parseDecoder(j.value("decoder", json()));
  } catch (const json::exception& e) {
    throw Error(origin + ": malformed tokenizer.json (" + e.what() + ")");
  }
  return std::shared_ptr<const Tokenizer>(new Tokenizer(std::move(impl)));
}

std::vector<int64_t> Tokenizer::encode(std::string_view text, bool addSpecialTokens) const {
  if (const size_t bad = findInvalidUtf8(text); bad != std::string_view::npos) {
    throw Error("cannot tokenize: the text is not valid UTF-8 at byte offset " +
                std::to_string(bad));
  }
  const Impl& m = *impl_;
  std::vector<int64_t> ids;
  size_t segmentStart = 0, i = 0;
  while (i < text.size()) {
    const AddedToken* hit = nullptr;
    for (size_t k : m.addedByFirstByte[uint8_t(text[i])]) {
      const auto& a = m.added[k];
      if (text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    size_t before = i, after = i + hit->content.size();
    if (hit->lstrip) {
      while (before > segmentStart && std::isspace(uint8_t(text[before - 1]))) --before;
    }
    if (hit->rstrip) {
      while (after < text.size() && std::isspace(uint8_t(text[after]))) ++after;
    }
    m.encodeText(text.substr(segmentStart, before - segmentStart), ids);
    ids.push_back(hit->id);
    segmentStart = i = after;
  }
  m.encodeText(text.substr(segmentStart), ids);
  if (!addSpecialTokens || m.singleTemplate.empty()) return ids;
  std::vector<int64_t> out;
  for (const auto& item : m.singleTemplate) {
    const auto& src = item.sequence ? ids : item.ids;
    out.insert(out.end(), src.begin(), src.end());
  }
  return out;
}

std::string Tokenizer::tokenText(int64_t id) const {
  if (!hasToken(id)) {
    throw Error("token id " + std::to_string(id) + " has no token in this tokenizer (its ids are " +
                "[0, " + std::to_string(vocabSize()) + "); a model may have more rows than that)");
  }
  if (const AddedToken* a = impl_->addedToken(id)) return a->content;
  return impl_->idToToken[size_t(id)];
}

std::string Tokenizer::unknownIdMarker(int64_t id) {
  return "<|id " + std::to_string(id) + "|>";
}

std::string Tokenizer::decodeIds(const std::vector<int64_t>& ids, bool skipSpecialTokens,
                                 bool markUnknownIds) const {
  std::string bytes;
  for (int64_t id : ids) {
    if (id < 0) {
      throw Error("cannot decode token id " + std::to_string(id) +
                  ": token ids are never negative");
    }
    if (!hasToken(id)) {
      if (markUnknownIds) bytes += unknownIdMarker(id);
      continue;
    }
    if (const AddedToken* a = impl_->addedToken(id)) {
      if (!(skipSpecialTokens && a->special)) bytes += a->content;  // added tokens are plain text
      continue;
    }
    const std::string& token = impl_->idToToken[size_t(id)];
    std::string raw;
    if (impl_->byteLevelDecoder && byteLevelToBytes(token, raw)) {
      bytes += raw;
    } else {
      bytes += token;  // symbols outside the byte alphabet are plain text
    }
  }
  return replaceInvalidUtf8(bytes);
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skipSpecialTokens) const {
  return decodeIds(ids, skipSpecialTokens, /*markUnknownIds=*/false);
}

std::string Tokenizer::displayText(const std::vector<int64_t>& ids, bool skipSpecialTokens) const {
  return decodeIds(ids, skipSpecialTokens, /*markUnknownIds=*/true);
}

std::string Tokenizer::tokenPiece(int64_t id) const {
  return displayText({id});
}

std::optional<int64_t> Tokenizer::tokenId(std::string_view token) const {
  for (const auto& a : impl_->added) {
    if (a.content == token) return a.id;
  }
  auto it = impl_->vocab.find(std::string(token));
  if (it == impl_->vocab.end()) return std::nullopt;
  return it->second;
}

bool Tokenizer::hasToken(int64_t id) const {
  return id >= 0 && id < vocabSize() && impl_->entry[size_t(id)] != Impl::kHole;
}

bool Tokenizer::isSpecial(int64_t id) const {
  if (!hasToken(id)) return false;
  const AddedToken* a = impl_->addedToken(id);
  return a && a->special;
}

int64_t Tokenizer::vocabSize() const {
  return int64_t(impl_->idToToken.size());
}

}  // namespace shardscope
