"""Physical floors of a Qwen3-MoE model's steps (issue 16), next to bench/floors.py's dense ones.

A decode step streams, per layer, the attention weights, the router and only the experts its
tokens chose (at batch 1 exactly top-k of them; at batch B the expected number of distinct
experts under uniform routing, E (1 - (1 - k/E)^B), an estimate the report labels), plus the LM
head and the KV-cache rows each request attends. A prefill of n tokens computes the attention, the
router and k experts per token, the LM head for the last row, and causal attention; with n k
choices over E experts it reads every expert, so its floor is max(FLOPs / rate, all streamed
bytes / bandwidth). At tensor parallel size tp each GPU holds 1/tp of the weights in either expert
layout; the floor divides by tp (under expert parallelism at batch 1 the chosen experts are not
split evenly, so the busiest GPU reads more: the report says so).

`python3 bench/moe_floors.py` checks the formulas on the Qwen3-30B-A3B configuration (ctest).
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import floors  # noqa: E402


class MoeShape:
    def __init__(self, cfg, dtype_bytes=2):
        self.layers = cfg["num_hidden_layers"]
        self.hidden = cfg["hidden_size"]
        self.vocab = cfg["vocab_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads", self.heads)
        self.head_dim = cfg.get("head_dim") or self.hidden // self.heads
        self.experts = cfg["num_experts"]
        self.top_k = cfg["num_experts_per_tok"]
        self.expert_inter = cfg["moe_intermediate_size"]
        self.dense_inter = cfg["intermediate_size"]
        self.tied = bool(cfg.get("tie_word_embeddings", False))
        step = cfg.get("decoder_sparse_step", 1)
        only = set(cfg.get("mlp_only_layers", []))
        self.sparse = [i not in only and (i + 1) % step == 0 for i in range(self.layers)]
        self.dtype_bytes = dtype_bytes

    def attention_params(self):
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return self.hidden * (q + 2 * kv) + q * self.hidden

    def expert_params(self):
        return 3 * self.hidden * self.expert_inter

    def norms_params(self):  # two layer norms and the q/k norms, per layer
        return 2 * self.hidden + 2 * self.head_dim

    def distinct_experts(self, batch):
        if batch == 1:
            return self.top_k
        return self.experts * (1 - (1 - self.top_k / self.experts) ** batch)

    def decode_weight_bytes(self, batch):
        total = 0.0
        for sparse in self.sparse:
            total += self.attention_params() + self.norms_params()
            if sparse:
                total += self.hidden * self.experts + self.distinct_experts(batch) * self.expert_params()
            else:
                total += 3 * self.hidden * self.dense_inter
        return (total + self.hidden + self.vocab * self.hidden) * self.dtype_bytes

    def streamed_weight_bytes(self):
        """Every weight but the embedding table (a prefill reads all experts)."""
        total = 0
        for sparse in self.sparse:
            total += self.attention_params() + self.norms_params()
            total += (self.hidden * self.experts + self.experts * self.expert_params() if sparse
                      else 3 * self.hidden * self.dense_inter)
        return (total + self.hidden + self.vocab * self.hidden) * self.dtype_bytes

    def kv_bytes_per_token(self):
        return self.layers * 2 * self.kv_heads * self.head_dim * self.dtype_bytes

    def decode_bytes(self, batch, attended):
        return self.decode_weight_bytes(batch) + batch * attended * self.kv_bytes_per_token()

    def prefill_flops(self, n):
        per_token = 0
        for sparse in self.sparse:
            per_token += self.attention_params()
            per_token += (self.hidden * self.experts + self.top_k * self.expert_params() if sparse
                          else 3 * self.hidden * self.dense_inter)
        causal = n * (n + 1) // 2
        attention = 2 * 2 * self.layers * self.heads * self.head_dim * causal
        return 2 * n * per_token + 2 * self.vocab * self.hidden + attention


def decode_floor(shape, batch, bandwidth, tp=1, attended=None):
    attended = floors.mean_attended() if attended is None else attended
    return shape.decode_bytes(batch, attended) / tp / bandwidth


def prefill_floor(shape, n, bandwidth, rate, tp=1):
    compute = shape.prefill_flops(n) / tp / rate
    memory = (shape.streamed_weight_bytes() + n * shape.hidden * shape.dtype_bytes) / tp / bandwidth
    return (compute, "compute") if compute >= memory else (memory, "bytes")


def _check():
    import json
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "configs", "qwen3-30b-a3b.json")))
    s = MoeShape(cfg)
    assert all(s.sparse) and len(s.sparse) == 48
    attention = 2048 * (4096 + 2 * 512) + 4096 * 2048
    assert s.attention_params() == attention == 18874368
    assert s.expert_params() == 3 * 2048 * 768
    # Batch 1: 48 layers of attention, norms, router and 8 experts, plus the LM head and the norm.
    layer = attention + 2 * 2048 + 2 * 128 + 2048 * 128 + 8 * 3 * 2048 * 768
    assert s.decode_weight_bytes(1) == (48 * layer + 2048 + 151936 * 2048) * 2
    # About 3.0 B parameters are read per token (the "A3B" of the name, 3.3 B, counts the
    # embedding table, of which a step reads one row).
    assert 3.0e9 < s.decode_weight_bytes(1) / 2 < 3.1e9, s.decode_weight_bytes(1) / 2
    # Every parameter but the embedding: 30.5 B in all.
    total = s.streamed_weight_bytes() / 2 + 151936 * 2048
    assert 30.4e9 < total < 30.6e9, total
    # Batch 16 reads about 82 of 128 experts per layer under uniform routing.
    assert abs(s.distinct_experts(16) - 128 * (1 - (120 / 128) ** 16)) < 1e-9
    assert 82 < s.distinct_experts(16) < 83
    # 2048 tokens: 12.9 TFLOP (17 ms at 750 TFLOP/s) against 60.3 GB of weights (14.4 ms at
    # 4.2 TB/s): compute-bound, narrowly.
    f, bound = prefill_floor(s, 2048, 4.2e12, 7.5e14)
    assert bound == "compute" and abs(f - s.prefill_flops(2048) / 7.5e14) < 1e-12, (f, bound)
    assert 12.5e12 < s.prefill_flops(2048) < 13.2e12, s.prefill_flops(2048)
    print("moe_floors: all checks passed")


if __name__ == "__main__":
    _check()
