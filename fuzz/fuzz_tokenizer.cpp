// Fuzz target: a tokenizer.json and a text to encode with it. The input is the JSON, then a NUL
// byte, then the text (no NUL: a fixed sample text). Loading must succeed or throw Error; a loaded
// tokenizer must encode (or refuse invalid UTF-8), decode what it encoded, and answer for ids
// inside and outside its vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "core/model/tokenizer.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string json(input.substr(0, nul));
  const std::string text = nul == std::string_view::npos
                               ? std::string("The capital of France is <|im_end|> 42 héllo\n")
                               : std::string(input.substr(nul + 1));
  using shardscope::Tokenizer;
  shardscope::fuzz::expectRefusalOrSuccess([&] {
    const auto tok = Tokenizer::fromJson(json, "tokenizer.json");
    for (bool special : {true, false}) {
      shardscope::fuzz::expectRefusalOrSuccess([&] {
        const auto ids = tok->encode(text, special);
        tok->decode(ids, /*skipSpecialTokens=*/false);
        tok->decode(ids, /*skipSpecialTokens=*/true);
      });
    }
    const int64_t n = tok->vocabSize();
    for (int64_t id : {int64_t(0), n / 2, n - 1, n, int64_t(-1)}) {
      shardscope::fuzz::expectRefusalOrSuccess([&] {
        tok->isSpecial(id);
        tok->tokenText(id);
        tok->tokenPiece(id);
      });
    }
    tok->tokenId(text);
  });
  return 0;
}
