package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/nodereg/nodereg/internal/testutil/node"
)

// A run that fails long before the inventory is collected (a wrong token:
// 78 after one attempt) while a family of the inventory hangs (a FIFO at
// /proc/meminfo stands for a hung read): the collection is stopped, not
// "not finished before the 5s deadline", and the outcome line is the last.
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
	for _, l := range lines {
		if strings.Contains(l, "not finished before") || strings.Contains(l, "Memory left out") {
			t.Errorf("a stopped collection reported as a deadline: %s", l)
		}
	}
}
