#!/bin/bash
# Trains the demo model on one GPU (torch, transformers and tokenizers installed): first encodes
# the held-out sample with the `tokenizers` package (reference ids for ShardScope's tokenizer
# test), then trains. A few minutes on one H200.
#
#   resources/demo-model/train.sh CORPUS_DIR OUT_DIR     (CORPUS_DIR from make_corpus.sh)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
corpus=${1:?usage: train.sh CORPUS_DIR OUT_DIR}
out=${2:?usage: train.sh CORPUS_DIR OUT_DIR}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
python3 -c 'import torch, transformers, tokenizers
print("torch", torch.__version__, "transformers", transformers.__version__,
      "tokenizers", tokenizers.__version__, torch.cuda.get_device_name())'
python3 "$here/check_tokenizer.py" "$here/tokenizer.json" "$corpus/heldout-sample.txt" \
  "$out/tokenizer_ids.json"
python3 "$here/train_model.py" --corpus "$corpus" --tokenizer "$here/tokenizer.json" \
  --sample "$corpus/heldout-sample.txt" --out "$out"
