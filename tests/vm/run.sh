#!/bin/sh
# make test-vm: the VM boot lab (docs/vmlab.md). NODEREG_SKIP_VM=1 skips it
# with one line; anything missing fails with one line, never a silent skip.
set -u
if [ "${NODEREG_SKIP_VM:-}" = 1 ]; then
	echo "vmlab: skipped (NODEREG_SKIP_VM=1)"
	exit 0
fi
for t in qemu-system-x86_64 qemu-img swtpm mmdebstrap ping dnsmasq; do
	if ! command -v "$t" >/dev/null 2>&1; then
		echo "vmlab: cannot run the VM lab: $t missing (apt-get install qemu-system-x86 qemu-utils mmdebstrap ipxe-qemu seabios swtpm swtpm-tools iputils-ping dnsmasq-base; or run tests/vm/ci-stage.sh)"
		exit 1
	fi
done
# VM_CASES="B1 B7" runs only those cases (and the ones they continue: B2
# and B3 go on with B1's machine, B5 with B6's), on the same image cache.
only='.'
if [ -n "${VM_CASES:-}" ]; then
	sel=""
	for c in $VM_CASES; do
		case "$c" in
		B1 | B4 | B6 | B7 | B8) add="$c" ;;
		B2 | B3) add="B1 $c" ;;
		B5) add="B6 $c" ;;
		*)
			echo "vmlab: VM_CASES: no case $c (the cases are B1-B8, docs/vmlab.md)"
			exit 1
			;;
		esac
		for a in $add; do
			case " $sel " in *" $a "*) ;; *) sel="$sel $a" ;; esac
		done
	done
	only="^Test($(echo $sel | tr ' ' '|'))[A-Z]"
	# The cases read it to power a machine off when no selected case
	# goes on with it.
	export VMLAB_SELECTED="$sel"
	echo "vmlab: cases$sel"
fi
mkdir -p bin/vm
log=bin/vm/test-vm.log
rc=0
${GO:-go} test -count=1 -tags vmlab -timeout "${VMLAB_TIMEOUT:-45m}" -run "$only" -v ./tests/vm/ >"$log" 2>&1 || rc=$?
grep -E '^(vmlab:|    |[0-9]+ passed, [0-9]+ failed|--- FAIL|ok |FAIL)' "$log" | grep -v '^    --- ' || true
if [ "$rc" != 0 ]; then
	echo "vmlab: failed (exit $rc); the whole output is in $log"
	grep -E -A12 '^=== RUN|_test.go:[0-9]+:' "$log" | grep -E '_test.go:[0-9]+:|^        ' | head -60
fi
# A test binary stopped from outside cannot clean up: stop what its pid
# files name, and its namespace.
run=bin/vm/run
for p in "$run"/*/qemu.pid "$run"/*/swtpm.pid "$run"/regserver.pid "$run"/dnsmasq.pid; do
	[ -f "$p" ] || continue
	pid=$(cat "$p")
	if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
		echo "vmlab: stopping leftover pid $pid ($p)"
		kill "$pid" 2>/dev/null
	fi
done
ns=$(cat "$run/netns" 2>/dev/null)
if [ -n "$ns" ] && ip netns list | awk '{print $1}' | grep -qx "$ns"; then
	echo "vmlab: deleting the leftover namespace $ns"
	ip netns del "$ns" 2>/dev/null || true
fi
# Nothing of the run may be left: no QEMU, swtpm, regserver or dnsmasq
# naming this run's directory, no namespace.
left=$(pgrep -af "$(pwd)/$run/" || true)
if [ -n "$left" ] || { [ -n "$ns" ] && ip netns list | awk '{print $1}' | grep -qx "$ns"; }; then
	echo "vmlab: FAIL: left after the run: ${left:-namespace $ns}"
	rc=1
fi
exit "$rc"
