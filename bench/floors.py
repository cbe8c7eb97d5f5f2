"""Physical floors of a decoder-only model's steps (issue 15), shared by the GPU reports.

A decode step streams every weight but the embedding table (it reads one row per request from
it; with tied embeddings the table is the LM head and is streamed) plus the KV-cache span each
request attends. A prefill of n tokens computes every layer's matmuls for all n rows but the LM
head for the last row only, plus causal attention; it still streams the weights once, so its floor
is max(FLOPs / matmul rate, bytes / bandwidth). At tensor parallel size tp each GPU holds and
computes 1/tp of both (the norms it replicates are under 0.01 % of the bytes).

The shapes come from gpu_speed's JSON (it records them since issue 15) or, for older runs, from
the config.json the run used. `python3 bench/floors.py` checks the formulas (ctest runs it).
"""
import json
import re
from dataclasses import dataclass

# gpu_speed's decode case: 5-token prompts, `--steps` greedy steps measured after the first token.
DECODE_PROMPT_TOKENS = 5
DECODE_STEPS = 64


@dataclass
class Shape:
    layers: int
    hidden: int
    intermediate: int
    vocab: int
    heads: int
    kv_heads: int
    head_dim: int
    tied: bool
    weight_bytes: int  # every parameter, as stored (bf16: 2 bytes each)
    dtype_bytes: int = 2

    @classmethod
    def from_config(cls, cfg, weight_bytes=None, dtype_bytes=2):
        heads = cfg["num_attention_heads"]
        head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
        s = cls(layers=cfg["num_hidden_layers"], hidden=cfg["hidden_size"],
                intermediate=cfg["intermediate_size"], vocab=cfg["vocab_size"], heads=heads,
                kv_heads=cfg.get("num_key_value_heads", heads), head_dim=head_dim,
                tied=bool(cfg.get("tie_word_embeddings", False)), weight_bytes=0,
                dtype_bytes=dtype_bytes)
        s.weight_bytes = weight_bytes if weight_bytes else s.parameters(cfg) * dtype_bytes
        return s

    @classmethod
    def from_run(cls, run, config=None):
        """A gpu_speed JSON's shape: its recorded config.json, else `config` (a dict), with the
        weight bytes the run counted when it has them."""
        config = config or run.get("config")
        if config is None:
            raise ValueError("this run predates gpu_speed recording its config.json: pass the "
                             "config it used (--config bench/configs/qwen3-8b.json)")
        return cls.from_config(config, run.get("weight_bytes"))

    # Per-layer matmul weights: q, k, v, o, gate, up, down.
    def layer_matmul_params(self):
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return self.hidden * (q + 2 * kv) + q * self.hidden + 3 * self.hidden * self.intermediate

    def parameters(self, cfg):
        """All parameters of a Qwen3 / Qwen2 / Llama layout (norms; q/k norms; qkv biases)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = self.layer_matmul_params() + 2 * self.hidden
        if cfg.get("model_type") == "qwen3":
            per_layer += 2 * self.head_dim
        if cfg.get("model_type") == "qwen2":
            per_layer += q + 2 * kv
        table = self.vocab * self.hidden
        return self.layers * per_layer + self.hidden + table * (1 if self.tied else 2)

    def lm_head_params(self):
        return self.vocab * self.hidden

    def embedding_bytes(self):
        return self.vocab * self.hidden * self.dtype_bytes

    def streamed_weight_bytes(self):
        """Weights one forward step reads: all but the embedding table (unless it is the head)."""
        return self.weight_bytes - (0 if self.tied else self.embedding_bytes())

    def kv_bytes_per_token(self):
        return self.layers * 2 * self.kv_heads * self.head_dim * self.dtype_bytes

    def decode_bytes(self, batch, attended):
        """One decode step: the streamed weights plus each request's `attended` cache rows."""
        return self.streamed_weight_bytes() + batch * attended * self.kv_bytes_per_token()

    def prefill_flops(self, n):
        """Layer matmuls for n rows, the LM head for the last row, causal QK^T and PV."""
        causal = n * (n + 1) // 2
        attention = 2 * 2 * self.layers * self.heads * self.head_dim * causal
        return 2 * n * self.layers * self.layer_matmul_params() + 2 * self.lm_head_params() + attention

    def prefill_bytes(self, n):
        """The streamed weights plus the n embedding rows the prompt reads."""
        return self.streamed_weight_bytes() + n * self.hidden * self.dtype_bytes


def mean_attended(prompt=DECODE_PROMPT_TOKENS, steps=DECODE_STEPS):
    """Mean cache rows a measured decode step attends: step i (1..steps) sees prompt + i."""
    return prompt + (steps + 1) / 2


def decode_floor(shape, batch, bandwidth, tp=1, attended=None):
    attended = mean_attended() if attended is None else attended
    return shape.decode_bytes(batch, attended) / tp / bandwidth


def prefill_floor(shape, n, bandwidth, matmul_rate, tp=1):
    """(floor, bound) with bound 'compute' or 'bytes'."""
    compute = shape.prefill_flops(n) / tp / matmul_rate
    memory = shape.prefill_bytes(n) / tp / bandwidth
    return (compute, "compute") if compute >= memory else (memory, "bytes")


def decode_attended(run):
    """Mean attended rows of a gpu_speed JSON's decode case (recorded since issue 15)."""
    return mean_attended(run.get("decode_prompt_tokens", DECODE_PROMPT_TOKENS),
                         run.get("steps", DECODE_STEPS))


def parse_gpu_speed_log(lines):
    """gpu_speed's stderr (as kept in docs/runs/*.txt) as the JSON fields the reports read: one
    dict per process, in order. Times are printed to 0.01 ms and rates to 1 GB/s or TFLOP/s."""
    runs = []
    for line in lines:
        m = re.match(r"floors: (\d+) GB/s, (\d+) TFLOP/s$", line.strip())
        if m:
            runs.append({"bandwidth_bytes_per_s": float(m[1]) * 1e9,
                         "matmul_flops_per_s": float(m[2]) * 1e12,
                         "prefill_s": {}, "decode": {}, "trace": {}})
            continue
        if not runs:
            continue
        r = runs[-1]
        m = re.match(r"prefill (\d+): ([\d.]+) ms", line)
        if m:
            r["prefill_s"][m[1]] = float(m[2]) / 1e3
        m = re.match(r"decode batch (\d+): ([\d.]+) ms/step", line)
        if m:
            r["decode"][m[1]] = {"per_step_s": float(m[2]) / 1e3}
        m = re.match(r"trace (\w+): ([\d.]+) ms/step", line)
        if m:
            r["trace"][m[1]] = {"per_step_s": float(m[2]) / 1e3}
    return runs


def _check():
    """The formulas on Qwen3-8B (bench/configs/qwen3-8b.json), by hand."""
    cfg = {"model_type": "qwen3", "vocab_size": 151936, "hidden_size": 4096,
           "intermediate_size": 12288, "num_hidden_layers": 36, "num_attention_heads": 32,
           "num_key_value_heads": 8, "head_dim": 128, "tie_word_embeddings": False}
    s = Shape.from_config(cfg)
    # Every parameter as gpu_speed counted it on the H200 (docs/runs/2026-11-29-gpu-speed-6-ours.json).
    assert s.weight_bytes == 16381470720, s.weight_bytes
    assert s.embedding_bytes() == 151936 * 4096 * 2 == 1244659712
    assert s.streamed_weight_bytes() == 16381470720 - 1244659712 == 15136811008
    # The decode matmuls alone (36 layers' 2-D weights + LM head) of the same run: 15136194560;
    # the rest of the streamed bytes are the norms (36 x (2 x 4096 + 2 x 128) + 4096, bf16).
    assert s.streamed_weight_bytes() - 15136194560 == 2 * (36 * (2 * 4096 + 2 * 128) + 4096)
    assert s.kv_bytes_per_token() == 36 * 2 * 8 * 128 * 2 == 147456
    assert mean_attended() == 37.5
    assert s.decode_bytes(1, 37.5) == 15136811008 + 37.5 * 147456
    # Run 6's decode at batch 1: 4.755 ms at 4153 GB/s is 1.30x the corrected floor (1.21x old).
    floor = decode_floor(s, 1, 4153187845910.2393)
    assert abs(floor - 3.6461e-3) < 1e-6, floor
    assert abs(0.004755359390625 / floor - 1.304) < 1e-3
    assert abs(0.004755359390625 / (16381470720 / 4153187845910.2393) - 1.206) < 1e-3
    layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 12288
    assert s.layer_matmul_params() == layer == 192937984
    n = 2048
    attention = 4 * 36 * 4096 * (n * (n + 1) // 2)
    assert s.prefill_flops(n) == 2 * n * 36 * layer + 2 * 151936 * 4096 + attention
    # 2048 tokens at 736 TFLOP/s: compute-bound, 40.3 ms (the old formula, the LM head for every
    # row, said 43.8 ms).
    f, bound = prefill_floor(s, n, 4153187845910.2393, 736011857849665.9)
    assert bound == "compute" and abs(f - 40.34e-3) < 0.01e-3, f
    # 5 tokens: bound by streaming the weights (3.64 ms), not by 0.1 ms of FLOPs.
    f, bound = prefill_floor(s, 5, 4153187845910.2393, 736011857849665.9)
    assert bound == "bytes" and abs(f - 3.6446e-3) < 1e-6, f
    # At tp=2 each GPU's floor halves.
    assert abs(decode_floor(s, 1, 4e12, tp=2) * 2 - decode_floor(s, 1, 4e12)) < 1e-15
    # Tied embeddings: the table is the LM head and is streamed.
    tied = Shape.from_config(dict(cfg, tie_word_embeddings=True))
    assert tied.streamed_weight_bytes() == tied.weight_bytes
    assert tied.weight_bytes == 16381470720 - 1244659712
    logged = parse_gpu_speed_log(["floors: 4155 GB/s, 777 TFLOP/s", "prefill 5: 8.05 ms (x)",
                                  "decode batch 16: 8.30 ms/step, 1929 tok/s",
                                  "trace read: 7.32 ms/step (total 477.1 ms)"])
    assert logged == [{"bandwidth_bytes_per_s": 4155e9, "matmul_flops_per_s": 777e12,
                       "prefill_s": {"5": 8.05e-3}, "decode": {"16": {"per_step_s": 8.3e-3}},
                       "trace": {"read": {"per_step_s": 7.32e-3}}}], logged
    print("floors: all checks passed")


if __name__ == "__main__":
    _check()
