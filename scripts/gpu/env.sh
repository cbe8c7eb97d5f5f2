# Sourced on the GPU machine (see README's developer section): unpacks the carried Debian packages
# (Qt Core/Test, SQLite, nlohmann-json, PCRE2, utf8proc) and exports the build variables.
# Keeps NVLink multicast off, as the machine's rules require.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
eval "$(bash .gpu-debs/unpack-debs .gpu-debs /tmp/debroot)"
export CMAKE_PREFIX_PATH="/tmp/debroot/usr;$CMAKE_PREFIX_PATH"
export SHARDSCOPE_CACHE=${SHARDSCOPE_CACHE:-$PWD/.gpu-cache}
export BUILD_DIR=${BUILD_DIR:-/tmp/build-gpu}
# Suites built on the demo model need the pinned Qwen3 tokenizer in the carried cache (README).
if ! compgen -G "$SHARDSCOPE_CACHE/assets/tokenizer-qwen3-*/tokenizer.json" > /dev/null; then
  echo "note: no Qwen3 tokenizer under $SHARDSCOPE_CACHE: suites that load the demo model will" \
    "fail; carry .gpu-cache as the README's developer section says" >&2
fi

# Configures and builds $BUILD_DIR (Release) with LibTorch's CUDA and NCCL; targets as arguments
# (none: everything). Warnings are not errors here: g++ 13 at -O3 reports false positives inside
# LibTorch 2.x headers; CI builds with -Werror.
gpu_build() {
  local out=${OUT:-/tmp}
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSHARDSCOPE_WERROR=OFF \
    -DCMAKE_PREFIX_PATH="$CMAKE_PREFIX_PATH" $SQLITE_CMAKE_ARGS > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; return 1; }
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build "$BUILD_DIR" --parallel "$(nproc)" "${targets[@]}" > "$out/build.log" 2>&1 || { grep -E "error|FAILED" -A5 "$out/build.log" | head -60; return 1; }
}

# Runs test suites with CUDA tensors, each entry a suite or suite:function, appending each one's
# totals and first failures to the log $1; lines of a suite's output matching $SUITE_EXTRA (an
# extended regex, unset: none) go to the log too; each suite may run SUITE_TIMEOUT seconds (240).
# The suites' own logs stay in /tmp.
gpu_suites() {
  local log=$1 entry suite
  shift
  for entry in "$@"; do
    suite=${entry%%:*}
    local function=()
    [[ $entry == *:* ]] && function=("${entry#*:}")
    SHARDSCOPE_TEST_DEVICE=cuda timeout "${SUITE_TIMEOUT:-240}" "$BUILD_DIR/bin/$suite" "${function[@]}" \
      > "/tmp/$suite.log" 2>&1
    echo "$entry (rc $?, ${SECONDS}s): $(grep -E 'Totals' "/tmp/$suite.log")" | tee -a "$log"
    grep -E -A3 "^FAIL|what\(\)" "/tmp/$suite.log" | head -16 | tee -a "$log"
    if [[ -n ${SUITE_EXTRA:-} ]]; then grep -E "$SUITE_EXTRA" "/tmp/$suite.log" | tee -a "$log"; fi
  done
}

# A random bf16 Qwen3-8B checkpoint on local disk (about 16 GB, written once per machine).
gpu_checkpoint() {
  local ckpt=${CHECKPOINT:-/tmp/qwen3-8b-random}
  if [[ ! -f $ckpt/model.safetensors ]]; then
    local start=$SECONDS
    "$BUILD_DIR/bin/shardscope-cli" make-checkpoint --config bench/configs/qwen3-8b.json --seed 1 "$ckpt" >&2
    echo "checkpoint written in $((SECONDS - start)) s" >&2
  fi
  echo "$ckpt"
}
