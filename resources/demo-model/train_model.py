"""Trains ShardScope's demo model: a 4-layer Qwen3 (transformers' Qwen3ForCausalLM) on the English
corpus of make_corpus.sh, with the tokenizer of train_tokenizer.py. Seeded; one H200 takes a few
minutes.

    python3 train_model.py --corpus CORPUS --tokenizer tokenizer.json --sample heldout-sample.txt
                           --out DIR [--steps N] [--seed S]

A third of the training rows carry a random token sequence twice (seeded), a common way to make
induction heads form early; the rest is natural text. Kept: the step with the lowest loss on a
validation part of the training split (every 50th block) among those where an induction head has
formed (a probe's repeat is predicted); the held-out split is only evaluated. Writes
config.json, generation_config.json, model.safetensors (bf16), report.json (losses, unigram
baseline, induction scores per head, reference numbers for ShardScope's tests) and
unigram_counts.json.
"""
import argparse
import json
import math
import pathlib
import time

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import Qwen3Config, Qwen3ForCausalLM

SEPARATOR = "\n\f\n"
VOCAB = 8192
END_OF_TEXT = VOCAB - 1
CONTEXT = 512
ROPE_THETA = 10000.0
# Written as config.json: the fields ShardScope's loader and transformers both read.
CONFIG = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "vocab_size": VOCAB,
    "hidden_size": 256,
    "intermediate_size": 768,
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 32,
    "hidden_act": "silu",
    "max_position_embeddings": 4096,
    "rms_norm_eps": 1e-06,
    "rope_theta": ROPE_THETA,
    "attention_bias": False,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "bos_token_id": END_OF_TEXT,
    "eos_token_id": END_OF_TEXT,
}
# The induction probe, shared with tests/core/model/tst_demo_model.cpp: a 64-bit LCG.
PROBE_SEED, PROBE_LENGTH = 20261130, 48


def probe_tokens(seed=PROBE_SEED, length=PROBE_LENGTH):
    x, out = seed, []
    for _ in range(length):
        x = (x * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        out.append((x >> 33) % END_OF_TEXT)
    return out + out


def qwen3_config():
    keys = {k: v for k, v in CONFIG.items()
            if k not in ("architectures", "model_type", "torch_dtype", "rope_theta")}
    try:
        config = Qwen3Config(**keys, rope_parameters={"rope_type": "default",
                                                      "rope_theta": ROPE_THETA})
    except TypeError:
        config = Qwen3Config(**keys, rope_theta=ROPE_THETA)
    return config


def encode_documents(tokenizer, path):
    documents = open(path, encoding="utf-8").read().split(SEPARATOR)
    ids = []
    for encoding in tokenizer.encode_batch(documents, add_special_tokens=False):
        ids.extend(encoding.ids)
        ids.append(END_OF_TEXT)
    return torch.tensor(ids, dtype=torch.long)


def chunked_loss(model, ids, device):
    """Mean next-token loss over consecutive chunks of CONTEXT tokens, each on its own (the scheme
    tests/core/model/tst_demo_model.cpp uses); full chunks run 64 at a time."""
    total, count = 0.0, 0
    full = (len(ids) // CONTEXT) * CONTEXT
    pieces = list(ids[:full].view(-1, CONTEXT).split(64)) + [ids[full:][None]]
    with torch.no_grad():
        for chunk in pieces:
            if chunk.shape[1] < 2:
                continue
            chunk = chunk.to(device)
            logits = model(input_ids=chunk, use_cache=False).logits.float()
            total += F.cross_entropy(logits[:, :-1].reshape(-1, VOCAB), chunk[:, 1:].reshape(-1),
                                     reduction="sum").item()
            count += chunk.shape[0] * (chunk.shape[1] - 1)
    return total / count, count


def unigram_loss(counts, ids):
    """Cross-entropy of `ids` under add-one-smoothed unigram frequencies of the training split."""
    p = (counts.double() + 1) / (counts.sum().double() + len(counts))
    return (-p.log()[ids[1:]]).mean().item()


def induction(model, device):
    ids = torch.tensor(probe_tokens(), device=device)[None]
    L = PROBE_LENGTH
    with torch.no_grad():
        out = model(input_ids=ids, output_attentions=True)
    nll = F.cross_entropy(out.logits[0, :-1].float(), ids[0, 1:], reduction="none")
    first, second = nll[:L - 1].mean().item(), nll[L:2 * L - 1].mean().item()
    scores = []
    queries = torch.arange(L, 2 * L, device=device)
    for layer, a in enumerate(out.attentions):
        for head in range(a.shape[1]):
            s = a[0, head, queries, queries - L + 1].float().mean().item()
            scores.append({"layer": layer, "head": head, "score": s})
    scores.sort(key=lambda s: -s["score"])
    return {"first_copy_loss": first, "second_copy_loss": second, "heads": scores}


def batches(train, generator, batch, device):
    """Rows of CONTEXT+1 tokens of natural text; a third of them carry a random token sequence
    (8 to 95 tokens) twice, at a random place, the copies 0 to 32 natural tokens apart."""
    starts = torch.randint(0, len(train) - CONTEXT - 1, (batch,), generator=generator)
    rows = torch.stack([train[s:s + CONTEXT + 1] for s in starts.tolist()])
    for r in range(0, batch, 3):
        length = int(torch.randint(8, 96, (1,), generator=generator))
        gap = int(torch.randint(0, 33, (1,), generator=generator)) * int(
            torch.randint(0, 2, (1,), generator=generator))
        at = int(torch.randint(0, CONTEXT + 1 - 2 * length - gap, (1,), generator=generator))
        seq = torch.randint(0, END_OF_TEXT, (length,), generator=generator)
        rows[r, at:at + length] = seq
        rows[r, at + length + gap:at + 2 * length + gap] = seq
    rows = rows.to(device, non_blocking=True)
    return rows[:, :-1], rows[:, 1:]


def induction_formed(model, device):
    """On a probe other than the tests' (seed + 1): second copy's loss under 30% of the first's."""
    ids = torch.tensor(probe_tokens(PROBE_SEED + 1), device=device)[None]
    L = PROBE_LENGTH
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits.float()
    nll = F.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="none")
    return nll[L:2 * L - 1].mean().item() < 0.3 * nll[:L - 1].mean().item()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--sample", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch", type=int, default=96)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--max-seconds", type=float, default=200.0)
    args = ap.parse_args()
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"

    tokenizer = Tokenizer.from_file(args.tokenizer)
    train_all = encode_documents(tokenizer, f"{args.corpus}/train.txt")
    heldout = encode_documents(tokenizer, f"{args.corpus}/heldout.txt")
    sample = torch.tensor(tokenizer.encode(open(args.sample, encoding="utf-8").read(),
                                           add_special_tokens=False).ids)
    # Validation (for picking the step to keep): every 50th block of 8192 training tokens.
    blocks = train_all[:len(train_all) // 8192 * 8192].view(-1, 8192)
    chosen = torch.arange(len(blocks)) % 50 == 25
    train, valid = torch.cat([blocks[~chosen].flatten(), train_all[blocks.numel():]]), \
        blocks[chosen].flatten()
    counts = torch.bincount(train_all, minlength=VOCAB)
    print(f"tokens: train {len(train)}, validation {len(valid)}, held-out {len(heldout)}, "
          f"sample {len(sample)}", flush=True)

    model = Qwen3ForCausalLM(qwen3_config()).to(device)
    d = CONFIG["head_dim"]
    want = 1.0 / ROPE_THETA ** (torch.arange(0, d, 2, dtype=torch.float) / d)
    got = model.model.rotary_emb.inv_freq.float().cpu()
    assert torch.allclose(got, want, rtol=1e-5), "rotary frequencies differ from rope_theta"
    params = sum(p.numel() for p in model.parameters())
    print(f"parameters: {params}", flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    other = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), fused=device == "cuda")
    warmup = 200

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        t = (step - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    generator = torch.Generator().manual_seed(args.seed)
    best = (float("inf"), -1, None)
    log = []
    began = time.time()
    step = 0
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        x, y = batches(train, generator, args.batch, device)
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(input_ids=x, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, VOCAB), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        last = step == args.steps - 1 or time.time() - began > args.max_seconds
        if step % 100 == 0 or last:
            model.eval()
            v, _ = chunked_loss(model, valid[:200_000], device)
            formed = induction_formed(model, device)
            model.train()
            log.append({"step": step, "train_loss": loss.item(), "valid_loss": v,
                        "induction": formed, "seconds": time.time() - began})
            print(json.dumps(log[-1]), flush=True)
            if formed and v < best[0]:
                best = (v, step, {k: t.detach().clone() for k, t in model.state_dict().items()})
        if last:
            break
    seconds = time.time() - began

    if best[2] is None:
        raise SystemExit("no induction head formed: train longer or with more repeated sequences")
    model.load_state_dict(best[2])
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.bfloat16().float())
    # The checkpoint as stored (bf16); every number below is of these weights, computed in fp32.
    state = {k: t.to(torch.bfloat16).contiguous() for k, t in model.state_dict().items()
             if k != "lm_head.weight"}
    save_file(state, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(
        {"bos_token_id": END_OF_TEXT, "eos_token_id": [END_OF_TEXT]}, indent=2) + "\n")

    stored = Qwen3ForCausalLM.from_pretrained(str(out), dtype=torch.float32,
                                              attn_implementation="eager").to(device).eval()
    probe = torch.tensor(probe_tokens(), device=device)[None]
    with torch.no_grad():
        reload_diff = (model.eval()(input_ids=probe).logits.float() -
                       stored(input_ids=probe).logits.float()).abs().max().item()
    print(f"reloaded checkpoint: max |logit difference| {reload_diff:.2e}", flush=True)
    heldout_loss, heldout_tokens = chunked_loss(stored, heldout, device)
    sample_loss, sample_tokens = chunked_loss(stored, sample, device)
    report = {
        "steps_run": step + 1, "best_step": best[1], "train_seconds": seconds,
        "parameters": params, "reload_max_abs_logit_diff": reload_diff, "batch": args.batch, "context": CONTEXT,
        "tokens": {"train": len(train), "validation": len(valid), "heldout": len(heldout)},
        "heldout_loss": heldout_loss, "heldout_tokens": heldout_tokens,
        "heldout_unigram_loss": unigram_loss(counts, heldout),
        "sample_loss": sample_loss, "sample_tokens": sample_tokens,
        "sample_unigram_loss": unigram_loss(counts, sample),
        "induction": induction(stored, device),
        "log": log,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "unigram_counts.json").write_text(json.dumps(counts.tolist()) + "\n")
    ind = report["induction"]
    print(f"held-out loss {heldout_loss:.3f} (unigram {report['heldout_unigram_loss']:.3f}); "
          f"sample {sample_loss:.3f} (unigram {report['sample_unigram_loss']:.3f}); induction "
          f"{ind['first_copy_loss']:.3f} -> {ind['second_copy_loss']:.3f}, best head "
          f"{ind['heads'][0]}", flush=True)


if __name__ == "__main__":
    main()
