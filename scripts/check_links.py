#!/usr/bin/env python3
"""Checks that every relative link in README.md and docs/*.md resolves.

A link `[text](target)` outside code (fenced blocks and `inline code`) is
checked when its target is relative (not http:, https:, mailto:): the path,
taken relative to the linking file, must exist in the repository, and an
anchor (`page.md#anchor` or `#anchor`) must name a heading of that page (the
id GitHub and mdBook give it: lowercase, punctuation dropped, spaces to
dashes, `-1`, `-2`, ... for repeats) or an explicit `<a id="...">`.

Usage: python3 scripts/check_links.py [FILE.md ...]   (default: README.md docs/*.md)
Prints each broken link as FILE:LINE: target (why) and exits 1 if any.
Standard library only; runs in well under a second.
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^()\s>]+(?:\([^()\s]*\))?)>?(?:\s+\"[^\"]*\")?\s*\)")
EXPLICIT_ID = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")
EXTERNAL = ("http://", "https://", "mailto:", "ftp://")


def slug(heading):
    """The anchor id of a heading's text (GitHub's and mdBook's rule)."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link in a heading: its text
    text = re.sub(r"<[^>]+>", "", text)
    out = []
    for ch in text.strip().lower():
        if ch.isalnum() or ch in "-_":
            out.append(ch)
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def strip_code(lines):
    """The lines with fenced blocks blanked and inline code removed (line numbers kept)."""
    out, fence = [], None
    for line in lines:
        m = re.match(r"^\s*(```+|~~~+)", line)
        if fence is None and m:
            fence = m.group(1)[0] * 3
            out.append("")
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
            continue
        out.append(re.sub(r"`+[^`]*`+", "", line))
    return out


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        ids, seen = set(), {}
        with open(path, encoding="utf-8") as f:
            lines = strip_code(f.read().split("\n"))
        for line in lines:
            m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
            if m:
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                ids.add(base if n == 0 else f"{base}-{n}")
            ids.update(EXPLICIT_ID.findall(line))
        _anchor_cache[path] = ids
    return _anchor_cache[path]


def check_file(path):
    errors = []
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    raw = "\n".join(strip_code(lines))
    here = os.path.dirname(path)
    for m in LINK.finditer(raw):
        target = m.group(1)
        lineno = raw.count("\n", 0, m.start()) + 1
        if target.startswith(EXTERNAL):
            continue
        file_part, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(here, file_part)) if file_part else path
        rel = os.path.relpath(path, ROOT)
        if not os.path.exists(dest):
            errors.append(f"{rel}:{lineno}: {target} (no such file: {os.path.relpath(dest, ROOT)})")
            continue
        if not os.path.abspath(dest).startswith(ROOT + os.sep) and os.path.abspath(dest) != ROOT:
            errors.append(f"{rel}:{lineno}: {target} (outside the repository)")
            continue
        if anchor:
            if not dest.endswith(".md"):
                errors.append(f"{rel}:{lineno}: {target} (an anchor into a file that is not Markdown)")
            elif anchor not in anchors(dest):
                errors.append(f"{rel}:{lineno}: {target} (no heading with id '{anchor}' in {os.path.relpath(dest, ROOT)})")
    return errors


def main(argv):
    files = argv[1:]
    if not files:
        docs = os.path.join(ROOT, "docs")
        files = [os.path.join(ROOT, "README.md")] + sorted(
            os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md")
        )
    errors = []
    for f in files:
        errors += check_file(os.path.abspath(f))
    for e in errors:
        print(e)
    print(f"check_links: {len(files)} files, {len(errors)} broken link(s)", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
