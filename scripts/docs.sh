#!/usr/bin/env bash
# Builds the documentation book (docs/, mdBook) into target/book and checks
# every relative link and anchor in README.md and docs/*.md.
# Installs mdbook (pinned, --locked) with cargo if it is missing: the first
# run compiles it (about 3 minutes on 2 cores); later runs take a second.
# The test command (scripts/test.sh) runs only the link check
# (scripts/check_links.py, well under a second), not this build.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
MDBOOK_VERSION=0.4.40
python3 scripts/check_links.py
if ! mdbook --version 2>/dev/null | grep -q "v$MDBOOK_VERSION"; then
    echo "docs: installing mdbook $MDBOOK_VERSION (cargo install --locked)" >&2
    cargo install mdbook --locked --version "$MDBOOK_VERSION"
fi
mdbook build docs
echo "docs: target/book/index.html" >&2
