"""Makes the Hugging Face golden data for the engine tests (run on the GPU machine, which has
transformers; the models are computed on its CPU in fp32 so the numbers do not depend on GPU
kernels).

For each tiny random model (Qwen3; Qwen2 with qkv bias; Llama with llama3 rope scaling and tied
embeddings, saved as a sharded checkpoint) it writes tests/golden/models/<name>/:
  config.json, generation_config.json, model.safetensors or model-0000x-of-0000y.safetensors +
  model.safetensors.index.json   (transformers' own save_pretrained)
  golden.safetensors   input_ids [7] I64, prefill_logits [7, V] F32 (every prompt position),
                       decode_logits [8, V] F32 (8 greedy decode steps through the KV cache),
                       greedy_ids [9] I64 (HF generate, do_sample=False)
Format version 1. Usage: python3 tests/golden/make_golden.py OUTDIR

With --bf16 it makes no models: it loads each saved model, casts it to bfloat16, runs the same
prompt with eager attention on the GPU and writes golden-bf16.safetensors beside golden.safetensors
(same tensors; logits are the bf16 model's, widened to fp32). The engine's bf16 rows compare to it.
"""
import json
import os
import sys

import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config, Qwen3Config

PROMPT = [3, 17, 42, 99, 123, 200, 7]
DECODE_STEPS = 8
COMMON = dict(vocab_size=250, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
              num_attention_heads=4, head_dim=16, max_position_embeddings=256, rms_norm_eps=1e-6,
              bos_token_id=None, eos_token_id=None, pad_token_id=None)


def rope(kind, theta):
    if kind == "llama3":
        return {"rope_type": "llama3", "rope_theta": theta, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 32}
    return {"rope_type": "default", "rope_theta": theta}


def make_config(cls, rope_kind, theta, **kw):
    params = rope(rope_kind, theta)
    try:
        return cls(**COMMON, rope_parameters=params, **kw)
    except TypeError:  # older transformers
        scaling = None if rope_kind == "default" else {k: v for k, v in params.items() if k != "rope_theta"}
        return cls(**COMMON, rope_theta=theta, rope_scaling=scaling, **kw)


MODELS = {
    "qwen3-tiny": (lambda: make_config(Qwen3Config, "default", 1e6, num_key_value_heads=2,
                                       tie_word_embeddings=False), None),
    "qwen2-tiny": (lambda: make_config(Qwen2Config, "default", 1e6, num_key_value_heads=2,
                                       tie_word_embeddings=False), None),
    "llama-tiny": (lambda: make_config(LlamaConfig, "llama3", 5e5, num_key_value_heads=1,
                                       tie_word_embeddings=True), "60KB"),
}


def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) / p.shape[-1] ** 0.5 * 1.5)


def main(out):
    torch.set_num_threads(8)
    print("transformers", transformers.__version__, "torch", torch.__version__)
    for seed, (name, (make, shard)) in enumerate(MODELS.items()):
        config = make()
        config._attn_implementation = "eager"
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32, attn_implementation="eager")
        randomize(model, 1000 + seed)
        model.eval()
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        model.save_pretrained(d, max_shard_size=shard) if shard else model.save_pretrained(d)
        ids = torch.tensor([PROMPT])
        prefill, steps, greedy = run_model(model, ids)
        with torch.no_grad():
            gen = model.generate(ids, do_sample=False, max_new_tokens=DECODE_STEPS + 1,
                                 min_new_tokens=DECODE_STEPS + 1)
        gen_ids = gen[0, len(PROMPT):].tolist()
        assert gen_ids == greedy, (gen_ids, greedy)
        save_file({"input_ids": ids[0].contiguous(), "prefill_logits": prefill.contiguous(),
                   "decode_logits": torch.stack(steps).contiguous(),
                   "greedy_ids": torch.tensor(greedy, dtype=torch.int64)},
                  os.path.join(d, "golden.safetensors"),
                  metadata={"format": "1", "made_by": "tests/golden/make_golden.py",
                            "transformers": transformers.__version__, "torch": torch.__version__})
        print(name, "greedy", greedy, "files", sorted(os.listdir(d)))
        print(json.dumps(json.load(open(os.path.join(d, "config.json"))))[:600])


def run_model(model, ids):
    """Prefill logits at every position, 8 greedy decode steps' logits, and the greedy ids."""
    with torch.no_grad():
        o = model(ids, use_cache=True)
        prefill = o.logits[0].float()
        past = o.past_key_values
        tok = prefill[-1].argmax().view(1, 1)
        steps, greedy = [], [int(tok)]
        for _ in range(DECODE_STEPS):
            o = model(tok, past_key_values=past, use_cache=True)
            past = o.past_key_values
            steps.append(o.logits[0, -1].float())
            tok = steps[-1].argmax().view(1, 1)
            greedy.append(int(tok))
    return prefill, steps, greedy


def main_bf16(out):
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print("transformers", transformers.__version__, "torch", torch.__version__, "on", device)
    for name in MODELS:
        d = os.path.join(out, name)
        model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager")
        model = model.to(device=device, dtype=torch.bfloat16).eval()
        ids = torch.tensor([PROMPT], device=device)
        prefill, steps, greedy = run_model(model, ids)
        save_file({"input_ids": ids[0].cpu().contiguous(), "prefill_logits": prefill.cpu().contiguous(),
                   "decode_logits": torch.stack(steps).cpu().contiguous(),
                   "greedy_ids": torch.tensor(greedy, dtype=torch.int64)},
                  os.path.join(d, "golden-bf16.safetensors"),
                  metadata={"format": "1", "made_by": "tests/golden/make_golden.py --bf16",
                            "device": device, "transformers": transformers.__version__,
                            "torch": torch.__version__})
        print(name, "bf16 greedy", greedy)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--bf16"]
    (main_bf16 if "--bf16" in sys.argv else main)(args[0] if args else "tests/golden/models")
