"""Locates the `hush` binary for the inference tests (the engines ship no
binaries of their own: the CLI lives in hush-cli)."""

import os
import shutil

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def hush_inference_bin():
    cands = [os.environ.get("HUSH_BIN", "")]
    tgt = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    cands += [os.path.join(tgt, "release", "hush"), os.path.join(ROOT, "target", "release", "hush")]
    for c in cands:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return shutil.which("hush")
