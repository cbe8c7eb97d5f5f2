"""Trains the demo model's tokenizer: byte-level BPE in Qwen's layout (NFC, the Qwen Split regex,
ByteLevel), written as a Hugging Face tokenizer.json that ShardScope's tokenizer and the
`tokenizers` package both load.

    python3 train_tokenizer.py CORPUS/train.txt OUT/tokenizer.json [VOCAB_SIZE]

Deterministic: the most frequent pair is merged next, ties broken by the pair's text. Needs the
`regex` module (Debian: python3-regex) for \\p{L} and \\p{N}.
"""
import collections
import heapq
import json
import sys
import unicodedata

import regex

SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
         r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
SEPARATOR = "\n\f\n"
END_OF_TEXT = "<|endoftext|>"


def bytes_to_unicode():
    """GPT-2's byte-to-character table: printable bytes stay, the rest move above U+0100."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    chars, extra = {}, 0
    for b in range(256):
        if b in keep:
            chars[b] = chr(b)
        else:
            chars[b] = chr(256 + extra)
            extra += 1
    return chars


def word_counts(path):
    byte_char = bytes_to_unicode()
    pattern = regex.compile(SPLIT)
    counts = collections.Counter()
    text = open(path, encoding="utf-8").read()
    for document in text.split(SEPARATOR):
        for piece in pattern.findall(unicodedata.normalize("NFC", document)):
            counts["".join(byte_char[b] for b in piece.encode("utf-8"))] += 1
    return counts


class PairCounts:
    """Counts of adjacent symbol pairs over all words, with the words each pair occurs in."""

    def __init__(self, words, freqs):
        self.words, self.freqs = words, freqs
        self.count = collections.Counter()
        self.where = collections.defaultdict(set)
        for i in range(len(words)):
            self.add_word(i, +1)
        self.heap = [(-c, p) for p, c in self.count.items()]
        heapq.heapify(self.heap)

    def add_word(self, i, sign):
        w, f = self.words[i], self.freqs[i]
        for pair in zip(w, w[1:]):
            self.count[pair] += sign * f
            if sign > 0:
                self.where[pair].add(i)

    def best(self):
        while self.heap:
            negative, pair = heapq.heappop(self.heap)
            if self.count.get(pair, 0) == -negative and -negative > 0:
                return pair, -negative
        return None, 0

    def merge(self, pair):
        merged = pair[0] + pair[1]
        touched = set()
        for i in sorted(self.where.pop(pair, ())):
            w = self.words[i]
            self.add_word(i, -1)
            out, k = [], 0
            while k < len(w):
                if k + 1 < len(w) and w[k] == pair[0] and w[k + 1] == pair[1]:
                    out.append(merged)
                    k += 2
                else:
                    out.append(w[k])
                    k += 1
            self.words[i] = out
            self.add_word(i, +1)
            touched.update(zip(out, out[1:]))
        for p in touched:
            if self.count[p] > 0:
                heapq.heappush(self.heap, (-self.count[p], p))


def train(counts, vocab_size):
    byte_char = bytes_to_unicode()
    vocab = {byte_char[b]: b for b in range(256)}
    items = sorted(counts.items())
    pairs = PairCounts([list(w) for w, _ in items], [c for _, c in items])
    merges = []
    while len(vocab) < vocab_size - 1:  # the last id is <|endoftext|>
        pair, n = pairs.best()
        if pair is None or n < 2:
            break
        pairs.merge(pair)
        merges.append(list(pair))
        vocab[pair[0] + pair[1]] = len(vocab)
    return vocab, merges


def tokenizer_json(vocab, merges):
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                  "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": len(vocab), "content": END_OF_TEXT, "single_word": False,
                          "lstrip": False, "rstrip": False, "normalized": False,
                          "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": SPLIT}, "behavior": "Isolated",
             "invert": False},
            byte_level]},
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": merges},
    }


def main():
    corpus, out = sys.argv[1], sys.argv[2]
    vocab_size = int(sys.argv[3]) if len(sys.argv) > 3 else 8192
    vocab, merges = train(word_counts(corpus), vocab_size)
    with open(out, "w", encoding="utf-8") as f:
        json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{out}: {len(vocab) + 1} ids ({len(merges)} merges)")


if __name__ == "__main__":
    main()
