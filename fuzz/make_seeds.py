#!/usr/bin/env python3
"""Writes the seed inputs of the fuzz corpora (fuzz/corpus/NAME/seed-*) from the repository's real
inputs: trace scripts from resources/examples and the trace test suites, config.json files of the
golden models and benchmarks, tokenizer.json files of the test assets cut down to a few hundred
tokens, safetensors files shaped like the golden checkpoints, and session files recorded by
shardscope-cli (given with --cli) rewritten with 512-byte pages so that they stay small.

The committed corpora started from these seeds and grew by fuzzing (scripts/fuzz merges what the
fuzzers find); run this only to start a corpus again:
    python3 fuzz/make_seeds.py --cli build/bin/shardscope-cli
"""
import argparse
import json
import os
import re
import sqlite3
import struct
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"
ASSETS = Path(os.environ.get("SHARDSCOPE_CACHE", Path.home() / ".cache" / "shardscope")) / "assets"


def write(target, name, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("seed-" + name)).write_bytes(data if isinstance(data, bytes) else data.encode())


# ---- trace scripts -------------------------------------------------------------------------

def c_string_literals(source):
    """The scripts the test suites hold as concatenated C string literals."""
    literal = r'"(?:[^"\\\n]|\\.)*"'
    for m in re.finditer(r"(?:%s\s*)+" % literal, source):
        parts = re.findall(literal, m.group(0))
        text = "".join(p[1:-1] for p in parts)
        text = text.encode().decode("unicode_escape").encode("latin-1").decode("utf-8", "replace")
        if "\n" in text and re.search(r"model|print|=|def |for ", text):
            yield text


def trace_seeds():
    scripts = {}
    for p in sorted((ROOT / "resources" / "examples").glob("*.py")):
        text = p.read_text()
        scripts[p.stem] = text
        # The same script on the fuzz model (4 layers, head size 8).
        scripts[p.stem + "-small"] = text.replace("layers[10]", "layers[1]").replace(
            "d = 7, 128", "d = 7, 8").replace(", 128\n", ", 8\n")
    for suite in ["tst_trace.cpp", "tst_seed_examples.cpp"]:
        source = (ROOT / "tests" / "core" / "trace" / suite).read_text()
        for i, text in enumerate(c_string_literals(source)):
            if "VLLM" not in text and "model" in text:
                text = 'model = VLLM("demo")\n' + text
            scripts["%s-%d" % (suite.split(".")[0], i)] = text
    scripts["language"] = (
        "def f(x, y=2):\n    return x * y + len([1, 2, 3])\n"
        "d = {'a': 1, 'b': [1.5, -2, 3e-5]}\n"
        "for k, v in d.items():\n    if k in ('a',) and not False:\n        print(f'{k}={v!r}')\n"
        "    elif v is None:\n        continue\n    else:\n        break\n"
        "i = 0\nwhile i < 3:\n    i += 1\n"
        "g = lambda a: a ** 2 // 3 % 5\nprint(f(3), g(4), [x for x in [1]] if False else 0)\n"
        "t = torch.arange(12).reshape(3, 4).float()\nprint(t[1:, ::2].sum(), t.T.shape, t @ t.T)\n"
        "assert abs(-1) == 1, 'abs'\nprint(sorted([3, 1, 2]), max(1, 2), min([4, 5]), repr('x'))\n")
    scripts["generate"] = (
        'model = VLLM("demo", tensor_parallel_size=2)\n'
        'with model.generate([1, 2, 3], max_tokens=3, temperature=0.7, top_k=5, seed=3) as tracer:\n'
        "    with tracer.invoke([4, 5]):\n"
        "        h = model.model.layers[0].mlp.output.clone().save()\n"
        "    with tracer.invoke(\"Hello there\"):\n"
        "        for i in tracer.iter[0:2]:\n"
        "            model.model.layers[1].self_attn.o_proj.input[:] = 0\n"
        "        out = tracer.result.save()\n"
        "print(h.shape, out.outputs[0].token_ids, model.tokenizer.decode([9707]))\n")
    for name, text in scripts.items():
        write("trace_parse", name, text)
        write("trace_run", name, text)


# ---- config.json ---------------------------------------------------------------------------

def config_seeds():
    paths = sorted((ROOT / "tests" / "golden" / "models").glob("*/config.json"))
    paths += sorted((ROOT / "bench" / "configs").glob("*.json"))
    paths += [ROOT / "tests" / "trace" / "qwen3-8b-widths.json"]
    for p in paths:
        write("model_config", p.parent.name + "-" + p.name, p.read_bytes())
    source = (ROOT / "core" / "model" / "model_source.cpp").read_text()
    demo = re.search(r'kDemoConfig = R"\((.*?)\)"', source, re.S)
    if demo:
        write("model_config", "demo.json", demo.group(1))
    old_style = {"model_type": "llama", "vocab_size": 128, "hidden_size": 64,
                 "intermediate_size": 96, "num_hidden_layers": 1, "num_attention_heads": 4,
                 "rope_theta": 500000.0, "eos_token_id": [1, 2], "torch_dtype": "bfloat16",
                 "rope_scaling": {"type": "llama3", "factor": 8.0,
                                  "original_max_position_embeddings": 8192}}
    write("model_config", "old-style.json", json.dumps(old_style))


# ---- tokenizer.json ------------------------------------------------------------------------

def byte_alphabet():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def small_tokenizer(full, merges=120, added=4, template=False):
    model = full["model"]
    keep = set(byte_alphabet())
    chosen = model["merges"][:merges]
    for m in chosen:
        a, b = m.split(" ", 1) if isinstance(m, str) else m
        keep.update([a, b, a + b])
    old = sorted((i, t) for t, i in model["vocab"].items() if t in keep)
    vocab = {t: n for n, (_, t) in enumerate(old)}
    out = dict(full)
    out["model"] = dict(model, vocab=vocab, merges=chosen)
    tokens = []
    for k, a in enumerate(full["added_tokens"][:added]):
        tokens.append(dict(a, id=len(vocab) + k))
    out["added_tokens"] = tokens
    if template and tokens:
        bos = tokens[0]
        out["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos["content"], "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [],
            "special_tokens": {bos["content"]: {"id": bos["content"], "ids": [bos["id"]],
                                                "tokens": [bos["content"]]}}}
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def tokenizer_seeds():
    texts = ["The capital of France is", "héllo wörld 123 4567 <|im_end|>\n\n  x",
             "日本語のテキスト and 中文 😀!", "<|begin_of_text|>Hi<|eot_id|>", ""]
    for name in ["qwen3", "llama3", "deepseek_v3"]:
        path = ASSETS / ("tokenizer-%s-3.7.2" % name) / "tokenizer.json"
        if not path.exists():
            print("skipped %s: %s is missing (scripts/fetch-assets)" % (name, path))
            continue
        full = json.loads(path.read_text())
        for i, text in enumerate(texts):
            small = small_tokenizer(full, template=(name == "llama3" and i % 2 == 0))
            write("tokenizer", "%s-%d" % (name, i), small.encode() + b"\0" + text.encode())


# ---- safetensors ---------------------------------------------------------------------------

DTYPES = {"F32": ("f", 4), "F16": ("e", 2), "BF16": ("H", 2), "F64": ("d", 8), "I64": ("q", 8),
          "I32": ("i", 4), "I16": ("h", 2), "I8": ("b", 1), "U8": ("B", 1), "BOOL": ("?", 1)}


def safetensors(entries, metadata=None, align=8):
    header, data = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, dtype, shape in entries:
        n = 1
        for d in shape:
            n *= d
        size = DTYPES[dtype][1]
        blob = bytes((i * 7 + 3) % 251 for i in range(n * size))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    text = json.dumps(header).encode()
    if align:
        text += b" " * ((align - len(text) % align) % align)
    return struct.pack("<Q", len(text)) + text + data


def safetensors_seeds():
    for model in sorted((ROOT / "tests" / "golden" / "models").iterdir()):
        golden = model / "golden.safetensors"
        if golden.exists() and golden.stat().st_size <= 16384:
            write("safetensors", model.name + "-golden", golden.read_bytes())
        # The checkpoint's own entries and dtypes, each shape cut to at most 2 per dimension.
        for f in sorted(model.glob("model*.safetensors"))[:1]:
            raw = f.read_bytes()
            n = struct.unpack("<Q", raw[:8])[0]
            header = json.loads(raw[8:8 + n])
            entries = [(k, v["dtype"], [min(d, 2) for d in v["shape"]])
                       for k, v in header.items() if k != "__metadata__"]
            write("safetensors", model.name + "-small", safetensors(entries, header.get("__metadata__")))
    write("safetensors", "dtypes", safetensors([("t_" + d.lower(), d, [2, 3]) for d in DTYPES]))
    write("safetensors", "edge-shapes", safetensors(
        [("scalar", "F64", []), ("empty", "F32", [0, 5]), ("vector", "I64", [3])], {"format": "pt"}))
    write("safetensors", "unaligned", safetensors([("a", "U8", [3]), ("b", "F32", [2])], align=0))


# ---- session files -------------------------------------------------------------------------

def migrations():
    source = (ROOT / "core" / "store" / "schema.cpp").read_text()
    return re.findall(r'R"sql\((.*?)\)sql"', source, re.S)


def shrink(db, out, user_version=None, extra_sql=""):
    """A copy of `db` with 512-byte pages (a session file of the product, but small)."""
    src = sqlite3.connect(db)
    app_id = src.execute("PRAGMA application_id").fetchone()[0]
    version = src.execute("PRAGMA user_version").fetchone()[0] if user_version is None else user_version
    dump = "\n".join(src.iterdump())
    src.close()
    if os.path.exists(out):
        os.remove(out)
    dst = sqlite3.connect(out, isolation_level=None)
    dst.execute("PRAGMA page_size = 512")
    dst.executescript(dump)
    if extra_sql:
        dst.executescript(extra_sql)
    dst.execute("PRAGMA application_id = %d" % app_id)
    dst.execute("PRAGMA user_version = %d" % version)
    dst.execute("VACUUM")
    dst.close()
    return Path(out).read_bytes()


SESSION_SCRIPT = """model = VLLM("demo")
with model.trace([1, 2, 3, 4]):
    h = model.model.layers[0].output[0][:, :4].clone().save()
    ids = model.logits.argmax(-1).save()
    n = len([1, 2]).save()
print(h.shape, n)
"""


def session_seeds(cli):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config = tmp / "config.json"
        config.write_text(json.dumps({
            "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 64,
            "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 2,
            "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 8,
            "max_position_embeddings": 32, "eos_token_id": 0}))
        script = tmp / "s.py"
        script.write_text(SESSION_SCRIPT)
        bad = tmp / "bad.py"
        bad.write_text('model = VLLM("demo")\nwith model.trace([1]):\n    x = model.nothing.output\n')
        db = tmp / "s.db"
        spec = "demo=random:%s@1" % config
        for s in [script, bad]:
            subprocess.run([cli, "run", str(s), "--log", str(db), "--model-dir", spec],
                           check=False, capture_output=True)
        subprocess.run([cli, "replay", str(db), "1"], check=False, capture_output=True)
        write("session_store", "runs", shrink(db, tmp / "a.db"))
        # A run left `running` by a process that is gone (the next writer marks it interrupted).
        write("session_store", "running", shrink(db, tmp / "b.db", extra_sql=(
            "UPDATE runs SET status = 'running', ended_ms = NULL, pid = 999999999 WHERE id = 2;")))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v1.db"
        dst = sqlite3.connect(path, isolation_level=None)
        dst.execute("PRAGMA page_size = 512")
        dst.executescript(migrations()[0])
        dst.execute("PRAGMA application_id = %d" % 0x53534350)
        dst.execute("PRAGMA user_version = 1")
        dst.close()
        write("session_store", "schema-v1", path.read_bytes())
    write("session_store", "not-sqlite", b"SQLite format 2\0 not a database")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", help="shardscope-cli, to record session files (else no session seeds)")
    args = ap.parse_args()
    trace_seeds()
    config_seeds()
    tokenizer_seeds()
    safetensors_seeds()
    if args.cli:
        session_seeds(args.cli)
    for d in sorted(CORPUS.iterdir()):
        files = list(d.iterdir())
        print("%-14s %4d files, %7d bytes" % (d.name, len(files), sum(f.stat().st_size for f in files)))


if __name__ == "__main__":
    main()
