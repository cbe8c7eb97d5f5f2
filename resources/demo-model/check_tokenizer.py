"""Encodes text with the `tokenizers` package (Hugging Face's reference encoder) and writes the
ids, so ShardScope's C++ tokenizer can be checked against them id for id
(tests/core/model/tst_demo_model.cpp reads the file).

    python3 check_tokenizer.py tokenizer.json heldout-sample.txt OUT.json
"""
import json
import sys

from tokenizers import Tokenizer

# Beside the held-out sample: edges of the Split regex, NFC, bytes above ASCII, the special token.
EXTRA = [
    "", " ", "  leading and trailing  ", "tabs\tand\r\nwindows line ends\r\n\n\n",
    "Don't you'LL I'M we've they'd", "numbers 1234567 3.14159 -42 0x7fff",
    "caf\u0065\u0301 na\u00efve \u00c5ngstr\u00f6m", "\u4f60\u597d\u4e16\u754c \U0001f600\U0001f680",
    "\u250c\u2500\u2500\u2500\u252c\u2500\u2500\u2510 box", "a<|endoftext|>b <|endoftext|>",
    "ls -la /usr/share/man | grep '^d' && echo \"$HOME\"",
]


def main():
    tokenizer = Tokenizer.from_file(sys.argv[1])
    sample = open(sys.argv[2], encoding="utf-8").read()
    texts = [sample] + sample.split("\n\n")[:40] + EXTRA
    cases = []
    for text in texts:
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        decoded = tokenizer.decode(ids, skip_special_tokens=False)
        cases.append({"text": text, "ids": ids, "decoded": decoded})
    with open(sys.argv[3], "w", encoding="utf-8") as f:
        json.dump({"tokenizer": "tokenizers", "cases": cases}, f, ensure_ascii=False, indent=0)
        f.write("\n")
    exact = sum(c["decoded"] == c["text"] for c in cases)
    print(f"{len(cases)} texts encoded; {exact} decode back exactly")


if __name__ == "__main__":
    main()
