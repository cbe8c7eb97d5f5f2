"""Physical floors of a Qwen3-MoE model's steps (issue 16) and of DeepSeek-V2 (issue 17,
DeepseekShape: latent attention, shared experts), next to bench/floors.py's dense ones.

A decode step streams, per layer, the attention weights, the router and only the experts its
tokens chose (at batch 1 exactly top-k of them; at batch B the expected number of distinct
experts under uniform routing, E (1 - (1 - k/E)^B), an estimate the report labels), plus the LM
head and the KV-cache rows each request attends. A prefill of n tokens computes the attention, the
router and k experts per token, the LM head for the last row, and causal attention; with n k
choices over E experts it reads every expert, so its floor is max(FLOPs / rate, all streamed
bytes / bandwidth). At tensor parallel size tp each GPU holds 1/tp of the weights in either expert
layout; the floor divides by tp (under expert parallelism at batch 1 the chosen experts are not
split evenly, so the busiest GPU reads more: the report says so).

`python3 bench/moe_floors.py` checks the formulas on the Qwen3-30B-A3B and DeepSeek-V2-Lite
configurations (ctest).
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


class DeepseekShape:
    """DeepSeek-V2 / V2-Lite (issue 17): multi-head latent attention and, from
    first_k_dense_replace on, routed experts plus shared experts. The same methods as MoeShape, so
    decode_floor and prefill_floor take either. A decode step attends in the latent space: it
    reads kv_b_proj's weights (absorbed into the query and output sides) and each request's
    latent cache rows (kv_lora_rank + qk_rope_head_dim per token and layer), never keys and values
    per head. A prefill expands the latent through kv_b_proj for every token and attends per head
    with qk_nope_head_dim + qk_rope_head_dim keys and v_head_dim values."""

    def __init__(self, cfg, dtype_bytes=2):
        self.layers = cfg["num_hidden_layers"]
        self.hidden = cfg["hidden_size"]
        self.vocab = cfg["vocab_size"]
        self.heads = cfg["num_attention_heads"]
        self.q_lora = cfg.get("q_lora_rank") or 0
        self.kv_lora = cfg["kv_lora_rank"]
        self.nope = cfg["qk_nope_head_dim"]
        self.rope = cfg["qk_rope_head_dim"]
        self.v = cfg["v_head_dim"]
        self.experts = cfg["n_routed_experts"]
        self.top_k = cfg["num_experts_per_tok"]
        self.expert_inter = cfg["moe_intermediate_size"]
        self.shared = cfg.get("n_shared_experts") or 0
        self.dense_inter = cfg["intermediate_size"]
        first_dense = cfg.get("first_k_dense_replace", 0)
        freq = cfg.get("moe_layer_freq", 1)
        self.sparse = [i >= first_dense and i % freq == 0 for i in range(self.layers)]
        self.dtype_bytes = dtype_bytes

    def attention_params(self):
        """q (q_proj, or q_a_proj + q_a_layernorm + q_b_proj), kv_a_proj_with_mqa,
        kv_a_layernorm, kv_b_proj and o_proj."""
        qk = self.nope + self.rope
        H = self.hidden
        q = (H * self.heads * qk if not self.q_lora
             else H * self.q_lora + self.q_lora + self.q_lora * self.heads * qk)
        kv = H * (self.kv_lora + self.rope) + self.kv_lora + self.kv_lora * self.heads * (self.nope + self.v)
        return q + kv + self.heads * self.v * H

    def expert_params(self):
        return 3 * self.hidden * self.expert_inter

    def norms_params(self):
        return 2 * self.hidden

    def moe_fixed_params(self):
        """What every MoE layer reads whatever the routing: the router and the shared experts."""
        return self.hidden * self.experts + self.shared * self.expert_params()

    def distinct_experts(self, batch):
        """Routed experts a step of `batch` tokens reads per layer: top-k at batch 1; beyond, the
        expectation under uniform routing (an estimate; at most min(E, batch * k))."""
        if batch == 1:
            return self.top_k
        return self.experts * (1 - (1 - self.top_k / self.experts) ** batch)

    def _layer_params(self, experts):
        total = 0.0
        for sparse in self.sparse:
            total += self.attention_params() + self.norms_params()
            total += (self.moe_fixed_params() + experts * self.expert_params() if sparse
                      else 3 * self.hidden * self.dense_inter)
        return total

    def decode_weight_bytes(self, batch):
        return (self._layer_params(self.distinct_experts(batch)) + self.hidden
                + self.vocab * self.hidden) * self.dtype_bytes

    def streamed_weight_bytes(self):
        """Every weight but the embedding table (a long prefill reads all experts)."""
        return (self._layer_params(self.experts) + self.hidden
                + self.vocab * self.hidden) * self.dtype_bytes

    def kv_bytes_per_token(self):
        """The latent cache: kv_lora_rank + qk_rope_head_dim values per token and layer."""
        return self.layers * (self.kv_lora + self.rope) * self.dtype_bytes

    def decode_bytes(self, batch, attended):
        return self.decode_weight_bytes(batch) + batch * attended * self.kv_bytes_per_token()

    def prefill_flops(self, n):
        per_token = 0
        for sparse in self.sparse:
            per_token += self.attention_params()
            per_token += (self.moe_fixed_params() + self.top_k * self.expert_params() if sparse
                          else 3 * self.hidden * self.dense_inter)
        causal = n * (n + 1) // 2
        attention = 2 * self.layers * self.heads * (self.nope + self.rope + self.v) * causal
        return 2 * n * per_token + 2 * self.vocab * self.hidden + attention


def shape_of(cfg):
    """The floor model for a config.json: DeepseekShape or MoeShape."""
    return DeepseekShape(cfg) if cfg.get("model_type") == "deepseek_v2" else MoeShape(cfg)


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
    _check_deepseek()
    print("moe_floors: all checks passed")


def _check_deepseek():
    import json
    cfg = json.load(open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                      "configs", "deepseek-v2-lite.json")))
    s = shape_of(cfg)
    assert isinstance(s, DeepseekShape)
    assert s.sparse == [False] + [True] * 26
    # q_proj 2048 x 16*192, kv_a_proj_with_mqa 2048 x 576, kv_a_layernorm 512,
    # kv_b_proj 512 x 16*256, o_proj 16*128 x 2048.
    attention = 2048 * 3072 + 2048 * 576 + 512 + 512 * 4096 + 2048 * 2048
    assert s.attention_params() == attention == 13763072
    expert = 3 * 2048 * 1408
    moe = 2048 * 64 + 2 * expert  # router and two shared experts
    dense = 3 * 2048 * 10944
    layer_fixed = attention + 2 * 2048
    expected = (27 * layer_fixed + dense + 26 * (moe + 6 * expert) + 2048 + 102400 * 2048) * 2
    assert s.decode_weight_bytes(1) == expected, (s.decode_weight_bytes(1), expected)
    # About 2.4 B parameters a token (DeepSeek's "2.4B activated" counts the embedding row too).
    assert 2.3e9 < s.decode_weight_bytes(1) / 2 < 2.5e9, s.decode_weight_bytes(1) / 2
    # All 15.7 B parameters but the embedding table (0.21 B).
    total = s.streamed_weight_bytes() / 2 + 102400 * 2048
    assert 15.6e9 < total < 15.8e9, total
    # The latent cache: 27 layers of 576 bf16 values, 31 KB a token (vs 27 * 2 * 16 * 128 * 2 =
    # 221 KB expanded).
    assert s.kv_bytes_per_token() == 27 * 576 * 2
    # Batch 16 reads about 51 of 64 routed experts per layer under uniform routing.
    assert 50 < s.distinct_experts(16) < 52, s.distinct_experts(16)
    # A 2048-token prefill: attention with 192-wide keys and 128-wide values per head; 9.8 TFLOP
    # (13 ms at 750 TFLOP/s) against 31 GB of weights (7.4 ms at 4.2 TB/s): compute-bound.
    causal = 2048 * 2049 // 2
    per_token = 27 * attention + dense + 26 * (moe + 6 * expert)
    flops = 2 * 2048 * per_token + 2 * 102400 * 2048 + 2 * 27 * 16 * (192 + 128) * causal
    assert s.prefill_flops(2048) == flops
    f, bound = prefill_floor(s, 2048, 4.2e12, 7.5e14)
    assert bound == "compute" and abs(f - flops / 7.5e14) < 1e-12, (f, bound)
    assert 9.7e12 < flops < 9.9e12, flops


if __name__ == "__main__":
    _check()
