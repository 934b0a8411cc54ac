#!/bin/sh
# Runs make targets as the stages of `make test`, each with its output in
# bin/stage-<target>.log, printed when the stage ends, and its wall time.
# Every stage runs even when an earlier one failed; the exit status is 1 if
# any failed. The closing lines are a table of stages, durations and results,
# then every skipped test with its reason: the stages' go test runs go
# through tests/gotest (GOTEST_WRAP), which writes bin/skips-<target>.txt.
#
# Usage: tests/stages.sh --skips    prints the skip list of the last run again
#        tests/stages.sh STAGE...   where a STAGE is a target or several
# joined by '+', run at the same time (e.g. test-fuzz+test-boot: the fuzz
# targets use the CPU while the boot simulation mostly waits on timers).
set -u
cd "$(dirname "$0")/.."
mkdir -p bin
: "${MAKE:=make}"
summary=bin/stage-summary.txt

# skipped: the skips, one line each: "[stage] package Test: reason". A test
# skipped in two stages (test-unit and test-race run many of the same)
# shows twice.
skipped() {
	skips=$(for f in bin/skips-*.txt; do
		[ -f "$f" ] || continue
		t=${f#bin/skips-}
		sed "s|^|[${t%.txt}] |" "$f"
	done | LC_ALL=C sort)
	echo
	if [ -z "$skips" ]; then
		echo "=== make test: no test skipped"
	else
		echo "=== make test: $(echo "$skips" | wc -l) skipped tests, with their reasons"
		echo "$skips" | sed 's/^/  /'
	fi
}
if [ "${1:-}" = --skips ]; then
	skipped
	exit 0
fi
: >"$summary"
rm -f bin/skips-*.txt
failed=0

# stage TARGET: runs one target, its output to its log; appends
# "target seconds status" to the summary.
stage() {
	log=bin/stage-$1.log
	mkdir -p bin
	start=$(date +%s)
	rm -f "bin/skips-$1.txt"
	"$MAKE" --no-print-directory "$1" \
		GOTEST_WRAP='$(GO) run ./tests/gotest -skips bin/skips-'"$1"'.txt --' >"$log" 2>&1
	rc=$?
	end=$(date +%s)
	echo "=== stage $1: $((end - start))s, exit $rc"
	cat "$log"
	mkdir -p bin
	echo "$1 $((end - start)) $rc" >>"$summary"
	return $rc
}

all_start=$(date +%s)
for group in "$@"; do
	echo "=== stage $group: started $(date -u +%H:%M:%S)"
	if [ "${group#*+}" = "$group" ]; then
		stage "$group" || failed=1
		continue
	fi
	# A group: every target in the background; each prints its log as a
	# whole when it ends, so the outputs do not interleave line by line.
	pids=""
	for target in $(echo "$group" | tr '+' ' '); do
		stage "$target" >"bin/stage-$target.out" 2>&1 &
		pids="$pids $!"
	done
	for pid in $pids; do
		wait "$pid" || failed=1
	done
	for target in $(echo "$group" | tr '+' ' '); do
		cat "bin/stage-$target.out"
		rm -f "bin/stage-$target.out"
	done
done
all_end=$(date +%s)

echo
echo "=== make test: stage durations (wall)"
while read -r target secs rc; do
	if [ "$rc" = 0 ]; then res=ok; else res="FAIL (exit $rc)"; fi
	printf '  %-14s %4ss  %s\n' "$target" "$secs" "$res"
done <"$summary"
if [ $failed = 0 ]; then res=ok; else res=FAIL; fi
printf '  %-14s %4ss  %s\n' total "$((all_end - all_start))" "$res"
skipped
exit $failed
