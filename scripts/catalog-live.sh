#!/usr/bin/env bash
# Every catalog file, live: what live mode accepts runs against real servers and is held to
# the file's own [expect] (the outcome its story derives, which the simulator meets); what it
# refuses is listed with the reason it gives. Not part of the test suite (it takes about as
# long as the files' durations, JOBS at a time); tests/live.rs runs a sample of it.
#
#   scripts/catalog-live.sh [FILE.toml ...]      (default: scenarios/catalog/*.toml)
#
# JOBS (default 3) runs at once; BIN a locksim binary already built (default: builds and
# uses target/release/locksim); LIBRARY=1 runs each file with `--library` (the real library
# its client profile models; a profile without a driver is refused by name). Prints one line
# per file (name, exit code, `expect met`, `expect NOT MET: ...` or `refused: ...`) and a
# count; exits 1 if any expect was not met.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${JOBS:-3}"
if [ -n "${BIN:-}" ]; then
  bin="$BIN"
else
  cargo build --release --quiet
  bin=target/release/locksim
fi
files=("$@")
[ ${#files[@]} -gt 0 ] || files=(scenarios/catalog/*.toml)
one() {
  local file=$1 out rc
  local flags=()
  [ "${LIBRARY:-}" = 1 ] && flags=(--library)
  out=$("$bin" live "$file" "${flags[@]}" 2>&1) && rc=0 || rc=$?
  local name
  name=$(basename "$file" .toml)
  if [ "$rc" = 2 ]; then
    echo "$name exit 2 refused: $(echo "$out" | tail -1 | sed 's/^locksim: [^:]*: //')"
  else
    echo "$name exit $rc $(echo "$out" | grep -E '^expect' | sed 's/  */ /g')"
  fi
}
export -f one
export bin LIBRARY
results=$(printf '%s\n' "${files[@]}" | xargs -P "$JOBS" -I{} bash -c 'one "$1"' _ {} | sort)
echo "$results"
echo "$(echo "$results" | grep -c 'expect met') met, $(echo "$results" | grep -c 'NOT MET') not met, $(echo "$results" | grep -c 'refused') refused, of ${#files[@]}"
! echo "$results" | grep -q 'NOT MET'
