#!/usr/bin/env bash
# The census: what the checker never falsely flags, and what it always catches.
# Not part of the test suite (it takes minutes); the README quotes its figures.
#
#   scripts/census.sh [all|clean|caught|mutants]
#
# - clean:   SEEDS seeds (default 100000) of each scenarios/census/*.toml file, the
#            configurations that must never be flagged: no property they expect to hold
#            may be violated. Prints per file the seeds, those whose [expect] was not met,
#            how many of those by a violation (a false flag), and the wall time; a seed
#            not met otherwise (fencing n/a in a run that granted nothing, so nothing to
#            check) is shown with the first such seed's reason.
# - caught:  CATALOG_SEEDS seeds (default 1000) of every scenarios/catalog/*.toml file: every
#            named bug must be caught (its [expect] met) on every seed.
# - mutants: cargo-mutants over the checker (check/src/{checker,mutual_exclusion,overlap}.rs),
#            tested by locksim-check's own tests; needs `cargo install cargo-mutants`.
#
# CENSUS_FILES (default scenarios/census/*.toml) names the clean configurations and
# CATALOG_FILES (default scenarios/catalog/*.toml) the stories to catch (a subset after a
# change to one protocol's model); JOBS (default: all cores) threads per sweep; results go
# to OUT (default target/census).
# BIN names a locksim binary already built (e.g. target/ci/locksim from
# `cargo build --release`); without it the script builds and uses the release binary.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
SEEDS="${SEEDS:-100000}"
CATALOG_SEEDS="${CATALOG_SEEDS:-1000}"
JOBS="${JOBS:-$(nproc)}"
OUT="${OUT:-target/census}"
mkdir -p "$OUT"
if [ -n "${BIN:-}" ]; then
  bin="$BIN"
else
  cargo build --release --quiet
  bin=target/release/locksim
fi

# Sweeps one file over 0..N; prints "file seeds not-met by-a-violation seconds" and, if
# some seed's [expect] was not met otherwise, the first such seed and its reason.
sweep() {
  local file="$1" n="$2" name out start end unmet violated
  name="$(basename "$file" .toml)"
  out="$OUT/$name.jsonl"
  rm -f "$out"
  start="$(date +%s.%N)"
  # Exit 1 means "violations found": a result here, not a failure of the script.
  "$bin" sweep "$file" --seeds "0..$n" --jobs "$JOBS" --out "$out" --quiet >"$OUT/$name.txt" || [ $? -eq 1 ]
  end="$(date +%s.%N)"
  unmet="$(grep -c '"expect_met":false' "$out" || true)"
  violated="$(grep '"expect_met":false' "$out" | grep -c 'expected holds, got violated' || true)"
  printf '%-72s %8s seeds %6s not met (%s by a violation) %8.1f s\n' "$file" \
    "$(wc -l <"$out")" "$unmet" "$violated" "$(echo "$end - $start" | bc)"
  if [ "$unmet" -gt "$violated" ]; then
    # `head` closes the pipe early: the greps' SIGPIPE must not end the census (pipefail).
    { grep '"expect_met":false' "$out" | grep -v 'expected holds, got violated' | head -1 |
      grep -oE '"seed":[0-9]+|"expect_unmet":\[[^]]*\]' | tr '\n' ' ' |
      sed 's/^/  first not met otherwise: /'; } || true
    echo
  fi
}

if [ "$what" = all ] || [ "$what" = clean ]; then
  echo "== nothing falsely flagged: $SEEDS seeds per configuration, --jobs $JOBS"
  for f in ${CENSUS_FILES:-scenarios/census/*.toml}; do sweep "$f" "$SEEDS"; done
fi
if [ "$what" = all ] || [ "$what" = caught ]; then
  echo "== everything caught: $CATALOG_SEEDS seeds per catalog file (each must meet its expect)"
  for f in ${CATALOG_FILES:-scenarios/catalog/*.toml}; do sweep "$f" "$CATALOG_SEEDS"; done
fi
if [ "$what" = all ] || [ "$what" = mutants ]; then
  echo "== cargo mutants over the checker"
  cargo mutants --in-place --package locksim-check \
    --file check/src/checker.rs --file check/src/mutual_exclusion.rs \
    --file check/src/overlap.rs --output "$OUT" -- --release
fi
