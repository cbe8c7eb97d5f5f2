#include "trace_caches.h"

#include "../model/tokenizer.h"
#include "bounded_lru.h"

namespace shardscope::trace {
namespace {

// Bounds: a GUI session reruns a handful of scripts and prompts; a benchmark one.
constexpr size_t kPrograms = 64;
constexpr size_t kProgramSourceBytes = size_t(8) << 20;
constexpr size_t kPrompts = 256;
constexpr size_t kPromptBytes = size_t(8) << 20;

struct ProgramKey {
  std::string file, source;
};

struct PromptKey {
  std::weak_ptr<const Tokenizer> tokenizer;
  std::string text;
};

bool sameOwner(const std::weak_ptr<const Tokenizer>& a, const std::shared_ptr<const Tokenizer>& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

BoundedLru<ProgramKey, std::shared_ptr<const Program>>& programs() {
  static BoundedLru<ProgramKey, std::shared_ptr<const Program>> cache(kPrograms,
                                                                      kProgramSourceBytes);
  return cache;
}

BoundedLru<PromptKey, std::vector<int64_t>>& prompts() {
  static BoundedLru<PromptKey, std::vector<int64_t>> cache(kPrompts, kPromptBytes);
  return cache;
}

}  // namespace

std::shared_ptr<const Program> parseProgramCached(const std::string& source,
                                                  const std::string& file) {
  auto hit =
      programs().find([&](const ProgramKey& k) { return k.source == source && k.file == file; });
  if (hit) return *hit;
  std::shared_ptr<const Program> program = parseProgram(source, file);  // throws on a bad source
  // The tree is several times the source; the source's size stands for it in the bound.
  programs().put({file, source}, program, 8 * source.size());
  return program;
}

std::vector<int64_t> encodePromptCached(const std::shared_ptr<const Tokenizer>& tokenizer,
                                        const std::string& text) {
  auto hit = prompts().find([&](const PromptKey& k) {
    return k.text == text && !k.tokenizer.expired() && sameOwner(k.tokenizer, tokenizer);
  });
  if (hit) return *hit;
  std::vector<int64_t> ids = tokenizer->encode(text);  // throws on invalid UTF-8
  prompts().put({tokenizer, text}, ids, text.size() + ids.size() * sizeof(int64_t),
                [](const PromptKey& k) { return k.tokenizer.expired(); });
  return ids;
}

}  // namespace shardscope::trace
