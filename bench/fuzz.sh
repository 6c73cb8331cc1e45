#!/usr/bin/env bash
# bench/fuzz.sh — runs every fuzz target of the module (each `func FuzzX` in a _test.go file)
# for FUZZTIME (default 60s) each, one after the other, and prints a markdown table: package,
# target, executions, new interesting inputs, and PASS or the failure with the input's file
# (go test keeps it under the package's testdata/fuzz/FuzzX/, where `go test` replays it from
# then on: commit it with the fix). Bounded: targets × FUZZTIME, on FUZZ_PROCS workers (default
# 1, so that the rest of a shared host is not taken).
#
# FUZZ_MINIMIZE (default 2s) bounds the minimization of each new interesting input. With go
# test's default, 60s, one input took most of a one-worker run: shrinking a 1.7 KB body whose
# new coverage no shorter one kept tries every cut, and the executions of a minimization are
# counted only once it ends, so FuzzJSONHandlers showed 199 in 45 s while it ran 5-10k a second.
#
# Usage: bench/fuzz.sh [fuzztime] — e.g. bench/fuzz.sh 10s for a quick pass; ONLY=FuzzParse to
# run the targets whose name contains it. Results go to stdout; each target's log to stderr.
set -euo pipefail
cd "$(dirname "$0")/.."
FUZZTIME=${1:-${FUZZTIME:-60s}}
FUZZ_PROCS=${FUZZ_PROCS:-1}
FUZZ_MINIMIZE=${FUZZ_MINIMIZE:-2s}
ONLY=${ONLY:-}

echo "# bench/fuzz.sh $FUZZTIME (FUZZ_PROCS=$FUZZ_PROCS, FUZZ_MINIMIZE=$FUZZ_MINIMIZE), $(date -u +%F), $(git rev-parse --short HEAD)"
echo
echo "| package | target | executions | new interesting | result |"
echo "|---|---|---:|---:|---|"
failed=0
while IFS=: read -r file _ decl; do
	target=$(sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' <<<"$decl")
	[ -n "$ONLY" ] && [[ $target != *"$ONLY"* ]] && continue
	pkg=$(dirname "$file")
	log=$(mktemp)
	if go test "$pkg" -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZ_MINIMIZE" -parallel "$FUZZ_PROCS" >"$log" 2>&1; then
		result=PASS
	else
		result="FAIL: $(grep -m1 -oE 'testdata/fuzz/[^ ]+' "$log" || tail -1 "$log")"
		failed=$((failed + 1))
	fi
	execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | cut -d' ' -f2 || true)
	fresh=$(grep -oE 'new interesting: [0-9]+' "$log" | tail -1 | cut -d' ' -f3 || true)
	echo "| ${pkg#./} | $target | ${execs:-?} | ${fresh:-?} | $result |"
	sed "s/^/[$target] /" "$log" >&2
	rm -f "$log"
done < <(grep -rn --include='*_test.go' -E '^func Fuzz[A-Za-z0-9_]*\(' . | grep -v '^./bench/' | sort)
echo
echo "$failed target(s) failed"
[ "$failed" -eq 0 ]
