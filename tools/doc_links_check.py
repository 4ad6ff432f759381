#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves.

A link [text](path) must name a file or directory of the tree (relative to the
document); [text](path#anchor) and [text](#anchor) must also name a heading of
the target markdown file (GitHub's slug: lower case, punctuation dropped,
spaces to hyphens; a repeated heading gets -1, -2, ...). Links to other
sites are not fetched. Prints one line per broken link; exit 1 if any.
Run from the repository root (CI stage 1 does).
"""
import glob
import os
import re
import sys

LINK = re.compile(r"(?<!\!)\[([^\]]*)\]\(([^)\s]+)\)")
FENCE = re.compile(r"^\s*```")


def slugs(path):
    seen = {}
    out = set()
    in_code = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                in_code = not in_code
                continue
            if in_code or not line.startswith("#"):
                continue
            text = line.lstrip("#").strip()
            s = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    return out


def links(path):
    in_code = False
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            if FENCE.match(line):
                in_code = not in_code
                continue
            if in_code:
                continue
            # Inline code spans may hold brackets that are not links.
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                yield no, m.group(2)


def main():
    docs = ["README.md"] + sorted(glob.glob("docs/*.md"))
    bad = []
    checked = 0
    for doc in docs:
        base = os.path.dirname(doc)
        for no, target in links(doc):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # another site, or mailto:
            checked += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(base, path)) if path else doc
            if not os.path.exists(dest):
                bad.append(f"{doc}:{no}: {target}: no such file ({dest})")
                continue
            if anchor and dest.endswith(".md") and anchor not in slugs(dest):
                bad.append(f"{doc}:{no}: {target}: {dest} has no heading #{anchor}")
    for line in bad:
        print(line)
    print(f"doc links: {checked} relative links in {len(docs)} documents, {len(bad)} broken")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
