#!/bin/sh
# Runs a command (make test, from make test-loaded) while stress-ng keeps
# every core busy, so a verdict that depends on the machine's speed shows
# up here: a deadline that measures speed instead of bounding a hang fails
# under load (docs/performance.md, "A loaded machine").
#
# Usage: tests/loaded.sh COMMAND...
# STRESS_CPU: stress-ng's CPU workers (default 8: four per core on the
# 2-core build machine). Debian's stress-ng is installed with apt-get when
# it is missing.
set -u
: "${STRESS_CPU:=8}"
if ! command -v stress-ng >/dev/null 2>&1; then
	echo "test-loaded: stress-ng is missing; installing Debian's (apt-get install stress-ng)" >&2
	sudo=
	[ "$(id -u)" = 0 ] || sudo=sudo
	$sudo apt-get install -y stress-ng >/dev/null 2>&1 ||
		{ $sudo apt-get update >/dev/null && $sudo apt-get install -y stress-ng >/dev/null; } ||
		{ echo "test-loaded: could not install stress-ng: install it (apt-get install stress-ng) and run again" >&2; exit 2; }
fi
# The timeout bounds the load if this script is killed before its trap
# runs; a suite never takes three hours.
stress-ng --cpu "$STRESS_CPU" --timeout 3h --quiet &
load=$!
trap 'kill "$load" 2>/dev/null; wait "$load" 2>/dev/null' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
echo "test-loaded: stress-ng --cpu $STRESS_CPU (pid $load) on $(nproc) cores while: $*" >&2
"$@"
rc=$?
echo "test-loaded: done (exit $rc) under stress-ng --cpu $STRESS_CPU; load average $(cut -d' ' -f1-3 /proc/loadavg)" >&2
exit $rc
