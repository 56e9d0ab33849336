#!/usr/bin/env bash
# Regenerates docs/images/decision-table.png, the README's picture of a report: runs the
# default `locksim compare` into a scratch folder and shows the top of its report.html (the
# bottom line and the decision table) in headless Chromium at 1280 px.
#
#   scripts/screenshot.sh [HEIGHT_PX]     (default 1400)
#
# Needs Debian's chromium (`apt-get install -y chromium`). The compare takes about a minute
# of CPU on two cores after the build.
set -euo pipefail
cd "$(dirname "$0")/.."
height="${1:-1400}"
out="$(mktemp -d "${TMPDIR:-/tmp}/locksim-screenshot-XXXXXX")"
trap 'rm -rf "$out"' EXIT
cargo build --release --quiet
target/release/locksim compare --out "$out/report" --quiet
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --window-size="1280,$height" --screenshot="$out/shot.png" "file://$out/report/report.html" \
  2>/dev/null
mkdir -p docs/images
mv "$out/shot.png" docs/images/decision-table.png
echo "wrote docs/images/decision-table.png (1280 x $height px)"
