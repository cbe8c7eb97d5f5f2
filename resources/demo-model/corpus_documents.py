"""Turns the unpacked Debian packages of make_corpus.sh into documents of plain English text.

    corpus_documents.py ROOT MAN_TEXT_DIR OUT_DIR

Fortunes are one document each, HTML pages (Debian Reference, Debian Policy) one document a page
with tags dropped, manual pages (already rendered by groff) one document a page. The held-out
split is every 20th document by a seeded hash of its name, so it does not depend on file order.
"""
import collections
import hashlib
import html.parser
import pathlib
import re
import sys

HELD_OUT_EVERY = 20
SPLIT_SEED = "shardscope-demo-corpus-1"
SEPARATOR = "\n\f\n"


class TextOfHtml(html.parser.HTMLParser):
    """Visible text of an HTML page, a paragraph per block element."""

    BLOCKS = {"p", "div", "br", "li", "pre", "h1", "h2", "h3", "h4", "h5", "h6", "tr", "dt", "dd",
              "table", "ul", "ol", "blockquote", "section"}
    HIDDEN = {"script", "style", "head", "title"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.parts, self.hidden, self.pre = [], 0, 0

    def handle_starttag(self, tag, attrs):
        if tag in self.HIDDEN:
            self.hidden += 1
        if tag == "pre":
            self.pre += 1
        if tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag):
        if tag in self.HIDDEN and self.hidden:
            self.hidden -= 1
        if tag == "pre" and self.pre:
            self.pre -= 1
        if tag in self.BLOCKS:
            self.parts.append("\n\n")

    def handle_data(self, data):
        if self.hidden:
            return
        self.parts.append(data if self.pre else re.sub(r"\s+", " ", data))

    def text(self):
        joined = "".join(self.parts)
        lines = [line.rstrip() for line in joined.split("\n")]
        return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def clean(text):
    text = text.replace("\r", "").replace("\f", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def fortunes(root):
    folder = root / "usr/share/games/fortunes"
    for path in sorted(folder.iterdir()):
        if path.suffix in (".dat", ".u8") or path.is_symlink() or not path.is_file():
            continue
        raw = path.read_bytes().decode("utf-8", errors="replace")
        for i, entry in enumerate(re.split(r"\n%\n", raw)):
            if entry.strip():
                yield f"fortunes/{path.name}/{i}", entry


def html_pages(root, folder):
    for path in sorted((root / folder).rglob("*.html")):
        if ".en." not in path.name and "debian-reference" in folder:
            continue
        parser = TextOfHtml()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        yield f"{folder}/{path.relative_to(root / folder)}", parser.text()


def manual_pages(man_dir):
    for path in sorted(man_dir.glob("*.txt")):
        yield f"man/{path.stem}", path.read_text(encoding="utf-8", errors="replace")


def held_out(name):
    digest = hashlib.sha256((SPLIT_SEED + name).encode()).digest()
    return int.from_bytes(digest[:4], "little") % HELD_OUT_EVERY == 0


def sample(documents, per_source=3000, piece=1500):
    """A few thousand tokens of held-out text for tests: about 3000 characters of each source,
    from the starts of its held-out documents (cut at a line end)."""
    parts, taken = [], collections.Counter()
    for source, text in documents:
        if taken[source] >= per_source:
            continue
        cut = text[:min(piece, per_source - taken[source])]
        if len(cut) < len(text) and "\n" in cut:
            cut = cut[:cut.rfind("\n")]
        parts.append(cut)
        taken[source] += len(cut) + 1
    return "\n\n".join(parts) + "\n"


def main():
    root, man_dir, out = (pathlib.Path(a) for a in sys.argv[1:4])
    sources = {
        "fortunes": fortunes(root),
        "debian-reference-en": html_pages(root, "usr/share/debian-reference"),
        "debian-policy": html_pages(root, "usr/share/doc/debian-policy/policy.html"),
        "manpages": manual_pages(man_dir),
    }
    splits = {"train": [], "heldout": []}
    stats = []
    for source, documents in sources.items():
        count, chars = 0, 0
        for name, text in documents:
            text = clean(text)
            if len(text) < 20:
                continue
            splits["heldout" if held_out(name) else "train"].append((source, text))
            count, chars = count + 1, chars + len(text)
        stats.append(f"{source}\t{count} documents\t{chars} characters")
    for split, documents in splits.items():
        texts = [text for _, text in documents]
        (out / f"{split}.txt").write_text(SEPARATOR.join(texts) + "\n", encoding="utf-8")
        stats.append(f"{split}.txt\t{len(texts)} documents\t{sum(map(len, texts))} characters")
    (out / "heldout-sample.txt").write_text(sample(splits["heldout"]), encoding="utf-8")
    (out / "stats.txt").write_text("\n".join(stats) + "\n")


if __name__ == "__main__":
    main()
