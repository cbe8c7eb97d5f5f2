#!/usr/bin/env bash
# The Debian package (packaging/): builds it with CPack from this build tree, unpacks it into a
# scratch root (dpkg -x), and checks what a user gets: both executables run from the scratch root
# (the CLI's --version and a real command, the GUI's --version offscreen), the desktop entry,
# icon, MIME type and manual pages are in place, and Depends names the Debian libraries.
# Skipped (exit 77) where the LibTorch linked is not from a Debian package (the GPU machine's pip
# LibTorch), since dpkg-shlibdeps cannot name a package for it.
# usage: tst_package.sh BUILD_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
fail() { echo "FAIL: $*" >&2; exit 1; }
for tool in cpack dpkg-deb dpkg-shlibdeps; do
  command -v $tool >/dev/null || { echo "SKIP: $tool not found"; exit 77; }
done
# awk reads all of ldd's output (an early exit would SIGPIPE ldd and fail the pipeline).
torch_lib=$(ldd "$build/bin/shardscope-cli" | awk '/libtorch_cpu|libtorch\.so/ && !n++ {print $3}')
if [[ -n $torch_lib ]] && ! dpkg -S "$(readlink -f "$torch_lib")" >/dev/null 2>&1 &&
  ! dpkg -S "$torch_lib" >/dev/null 2>&1; then
  echo "SKIP: $torch_lib is not from a Debian package"
  exit 77
fi

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$build"
cpack -G DEB -B "$scratch/out" > "$scratch/cpack.log" 2>&1 || { cat "$scratch/cpack.log"; fail "cpack"; }
deb=$(find "$scratch/out" -maxdepth 1 -name 'shardscope_*.deb' | sort | tail -1)
[[ -f $deb ]] || { cat "$scratch/cpack.log"; fail "no .deb written"; }
echo "package: $(basename "$deb"), $(du -h "$deb" | cut -f1)"

fields=$(dpkg-deb -f "$deb" Package Version Architecture Depends Section)
echo "$fields"
grep -q "^Package: shardscope$" <<< "$fields" || fail "package name"
depends=$(dpkg-deb -f "$deb" Depends)
for lib in libtorch libsqlite3 libpcre2 libutf8proc; do
  grep -q "$lib" <<< "$depends" || fail "Depends lacks $lib: $depends"
done

root="$scratch/root"
dpkg -x "$deb" "$root"
cli="$root/usr/bin/shardscope-cli"
[[ -x $cli ]] || fail "no usr/bin/shardscope-cli"
version=$("$cli" --version)
echo "$version"
[[ $version == "shardscope-cli "[0-9]* ]] || fail "shardscope-cli --version printed '$version'"
# The trained demo model is installed where the executables look for it (bin/../share).
for f in config.json model.safetensors tokenizer.json SOURCES.md; do
  [[ -s $root/usr/share/shardscope/demo-model/$f ]] || fail "demo model: missing $f"
done
# A real command of the installed CLI: the installed demo model's module tree (4 layers, hidden
# 256), and its tokenizer.
"$cli" inspect --tp 2 > "$scratch/inspect.txt" 2>&1 || { cat "$scratch/inspect.txt"; fail "installed CLI inspect"; }
grep -q "qkv_proj" "$scratch/inspect.txt" || fail "inspect printed no module tree"
grep -q "of \[8192, 256\]" "$scratch/inspect.txt" || fail "inspect did not load the trained demo model"
"$cli" tokenize "The quick brown fox" > "$scratch/tokens.txt" 2>&1 || fail "installed CLI tokenize"
grep -q "^[0-9][0-9 ]*$" "$scratch/tokens.txt" || fail "tokenize printed no ids"
# The examples are compiled in: one runs from the scratch root; their files are in the docs too.
"$cli" run --example logit_lens > "$scratch/lens.txt" 2>&1 || { cat "$scratch/lens.txt"; fail "installed CLI run --example"; }
grep -q "^model: " "$scratch/lens.txt" || fail "the logit lens example printed no prediction"
[[ -s $root/usr/share/doc/shardscope/examples/logit_lens.py ]] || fail "examples not installed"

for f in usr/share/man/man1/shardscope-cli.1.gz usr/share/doc/shardscope/trace-language.md; do
  [[ -s $root/$f ]] || fail "missing $f"
done
zcat "$root/usr/share/man/man1/shardscope-cli.1.gz" | grep -q "^.SH SYNOPSIS" || fail "man page"
if [[ -e $build/bin/shardscope ]]; then
  gui="$root/usr/bin/shardscope"
  [[ -x $gui ]] || fail "no usr/bin/shardscope"
  gui_version=$(QT_QPA_PLATFORM=offscreen XDG_RUNTIME_DIR="$scratch" "$gui" --version 2>/dev/null)
  echo "$gui_version"
  [[ $gui_version == "ShardScope "[0-9]* ]] || fail "shardscope --version printed '$gui_version'"
  for f in usr/share/applications/shardscope.desktop usr/share/mime/packages/shardscope.xml \
    usr/share/icons/hicolor/scalable/apps/shardscope.svg usr/share/man/man1/shardscope.1.gz; do
    [[ -s $root/$f ]] || fail "missing $f"
  done
  grep -q "^Exec=shardscope %f$" "$root/usr/share/applications/shardscope.desktop" || fail "desktop Exec"
  grep -q 'glob pattern="\*.shardscope"' "$root/usr/share/mime/packages/shardscope.xml" || fail "MIME glob"
  if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$root/usr/share/applications/shardscope.desktop" || fail "desktop entry"
  fi
fi
echo "PASS: the package installs into a scratch root and runs"
