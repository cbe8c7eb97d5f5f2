#!/bin/bash
# Builds the demo model's English corpus from Debian 12 packages: fortunes, the Debian Reference,
# the Linux manual pages and the Debian Policy Manual. Pinned versions, so the text is the same
# on every machine; each package's copyright file is kept beside the text (see SOURCES.md).
#
#   resources/demo-model/make_corpus.sh OUT_DIR
#
# Writes OUT_DIR/train.txt and OUT_DIR/heldout.txt (documents separated by a line holding only
# a form feed; every 20th document, by a seeded hash of its name, is held out), OUT_DIR/stats.txt
# and OUT_DIR/copyright/PACKAGE. Needs apt-get (download only, no root), dpkg-deb, groff and
# python3.
set -euo pipefail

out=${1:?usage: make_corpus.sh OUT_DIR}
here=$(cd "$(dirname "$0")" && pwd)
packages=(
  "fortunes-min=1:1.99.1-7.3"
  "fortunes=1:1.99.1-7.3"
  "debian-reference-en=2.100"
  "manpages=6.03-2"
  "manpages-dev=6.03-2"
  "debian-policy=4.6.2.0"
)

mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root" "$out/copyright"
(cd "$work/debs" && apt-get download -q "${packages[@]}" >/dev/null 2>&1) ||
  { echo "apt-get download failed: needs Debian 12 (bookworm) package lists" >&2; exit 1; }
: >"$out/packages.txt"
for deb in "$work"/debs/*.deb; do
  dpkg-deb -x "$deb" "$work/root"
  name=$(dpkg-deb -f "$deb" Package)
  printf '%s\t%s\n' "$name" "$(dpkg-deb -f "$deb" Version)" >>"$out/packages.txt"
done
# After all are unpacked: some doc folders are links to a sibling package's.
cut -f1 "$out/packages.txt" | while read -r name; do
  cp "$work/root/usr/share/doc/$name/copyright" "$out/copyright/$name"
done

# Manual pages to plain text (no hyphenation, no overstrike), one document each.
mkdir -p "$work/man"
find "$work/root/usr/share/man" -name '*.gz' -type f | sort | while read -r page; do
  base=$(basename "$page" .gz)
  zcat "$page" | (cd "$(dirname "$page")/.." &&
    groff -t -man -Tutf8 -P -cbou -rHY=0 -rLL=78n 2>/dev/null) >"$work/man/$base.txt" || true
done

python3 "$here/corpus_documents.py" "$work/root" "$work/man" "$out"
cat "$out/stats.txt"
