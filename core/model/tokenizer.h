// Tokenizer: a Hugging Face tokenizer.json (byte-level BPE) in C++, matching the reference encoder
// id for id. Supported components (anything else is refused with an error naming it):
//   normalizer     NFC, NFD, NFKC, NFKD, Sequence of those, null
//   pre_tokenizer  Split (regex or string; Isolated, Removed, MergedWithPrevious, MergedWithNext),
//                  ByteLevel (add_prefix_space, use_regex), Sequence of those
//   model          BPE (byte-level; merges as "a b" strings or [a, b] pairs; ignore_merges)
//   added tokens   matched before everything else (leftmost, longest), never split
//   post_processor TemplateProcessing (single sequence), ByteLevel, null
//   decoder        ByteLevel, null
//   token ids      integers in [0, 2^22) (a dense table is kept up to the largest)
// Regexes run through PCRE2 with UTF and Unicode properties. Plain C++: no LibTorch.
// Thread-safe: encode and decode may be called concurrently.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace shardscope {

class Tokenizer {
 public:
  static std::shared_ptr<const Tokenizer> fromFile(const std::filesystem::path& path);
  // `origin` names the source in errors.
  static std::shared_ptr<const Tokenizer> fromJson(const std::string& json,
                                                   const std::string& origin);
  ~Tokenizer();

  // Throws Error on invalid UTF-8 (naming the byte offset).
  std::vector<int64_t> encode(std::string_view text, bool addSpecialTokens = true) const;

  // Ids without a token. A model's embedding and LM head may have more rows than its tokenizer
  // has ids (Qwen3: 151936 rows, 151669 ids), and sampling may pick any row. As in Hugging Face
  // and vLLM, such an id (or a hole in the tokenizer's ids) decodes to no text; displayText shows
  // it as unknownIdMarker(id) instead, for text a person reads. Negative ids throw Error.

  // The text of `ids`, as Hugging Face's decode gives it. Bytes that do not form valid UTF-8 (a
  // token cut mid-character) become U+FFFD.
  std::string decode(const std::vector<int64_t>& ids, bool skipSpecialTokens = false) const;
  // decode for people (the CLI, the session log, the GUI): an id without a token becomes
  // `<|id N|>` rather than nothing.
  std::string displayText(const std::vector<int64_t>& ids, bool skipSpecialTokens = false) const;
  static std::string unknownIdMarker(int64_t id);  // "<|id 151691|>"

  // The vocabulary string of `id` as stored (byte-level alphabet), or its added-token content.
  // Throws Error for an id without a token.
  std::string tokenText(int64_t id) const;
  // The text one token shows as on its own (for listings such as `shardscope-cli tokenize`, plot
  // labels): displayText({id}).
  std::string tokenPiece(int64_t id) const;
  std::optional<int64_t> tokenId(std::string_view token) const;
  bool hasToken(int64_t id) const;  // id is in the vocabulary or an added token
  bool isSpecial(int64_t id) const;
  int64_t vocabSize() const;  // largest id + 1, added tokens included

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::string decodeIds(const std::vector<int64_t>& ids, bool skipSpecialTokens,
                        bool markUnknownIds) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace shardscope
