package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
)

// A run that fails at once (a wrong token: 78 after one attempt) while a
// hardware file of the inventory is a FIFO at /proc/meminfo, which would
// hang a plain read: the edge refuses the FIFO instead of waiting for a
// writer, the Memory family says so (the file and its kind, not only ghw's
// words), nothing reports a deadline, and the outcome line is the last. A
// read that really hangs is stopped, not called a deadline: agent/inventory's
// TestCollectStoppedIsNotADeadline holds that in process, as no real file
// under --root can hang a read of the binary's.
func TestFailedRunEndsWithItsFinalLine(t *testing.T) {
	rs := regserver(t)
	m := node.New(t, "52:54:00:00:0e:31", rs.URL("wrong-token"), "")
	meminfo := filepath.Join(m.Root, "proc", "meminfo")
	node.Must(t, os.MkdirAll(filepath.Dir(meminfo), 0o755))
	_ = os.Remove(meminfo)
	if err := syscall.Mkfifo(meminfo, 0o644); err != nil {
		t.Skipf("cannot create a FIFO here: %v", err)
	}
	r := agent(t, "agent", nil, "--root", m.Root, "--deadline", "10m")
	if r.code != 78 {
		t.Fatalf("exit %d, want 78\n%s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "exit=78") {
		t.Errorf("the last line is not the outcome: %q\n%s", last, r.stderr)
	}
	memory := 0
	for _, l := range lines {
		if strings.Contains(l, "not finished before") || strings.Contains(l, "deadline") {
			t.Errorf("a refused file reported as a deadline: %s", l)
		}
		if strings.Contains(l, "Memory left out") {
			memory++
			if !strings.Contains(l, "meminfo") || !strings.Contains(l, "a FIFO") {
				t.Errorf("the Memory family does not name the refused file and its kind: %s", l)
			}
		}
	}
	if memory != 1 {
		t.Errorf("%d lines say Memory was left out, want 1\n%s", memory, r.stderr)
	}
}
