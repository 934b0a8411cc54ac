package hostile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/statelock"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
)

// TestStatePathFIFONeedsAPerson (docs/reliability.md, "Hostile server"): a FIFO at the state path
// fails every run the same way: exit 78 at phase state, not 75 for ever.
func TestStatePathFIFONeedsAPerson(t *testing.T) {
	bin := testbin.Build(t, "./cmd/agent")
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n")}
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:15:00:0b", url, "")
	testutil.Must(t, syscall.Mkfifo(filepath.Join(m.Root, node.StatePath), 0o600))
	type result struct {
		code  int
		final string
	}
	// A FIFO must not block the run: inTime fails the test if it does.
	r := inTime(t, 30*time.Second, func() result {
		code, _, final := runBinary(t, bin, nil, "--root", m.Root, "--deadline", "5s")
		return result{code, final}
	})
	code, final := r.code, r.final
	wantFinal(t, code, 78, final, "not registered: needs a person", "phase=state", "exit=78")
	if s.Hits() != 0 {
		t.Errorf("the run talked to the server %d times", s.Hits())
	}
	if fi, err := os.Lstat(filepath.Join(m.Root, node.StatePath)); err != nil || fi.Mode().Type() != os.ModeNamedPipe {
		t.Errorf("the FIFO was touched: %v", err)
	}
}

// TestStaleTempFilesRemoved: the temp files of writes a
// kill -9 cut short (.nodereg-<digits>.tmp) go at the next run that holds
// the lock, in each directory the agent writes; files of that look that are
// not Write's temp files stay.
func TestStaleTempFilesRemoved(t *testing.T) {
	bin := testbin.Build(t, "./cmd/agent")
	stub := testbin.Build(t, "./tests/stubs/nmstatectl")
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\n"), Network: []byte(seedPRNetwork)}
	url, _ := s.Start(t, false, "tok")
	m := node.New(t, "52:54:00:15:00:0c", url, "    network-config: explicit\n")
	var stale, kept []string
	for _, dir := range []string{"oem/registration", "oem", "oem/nodereg", "etc/NetworkManager/system-connections", "run/NetworkManager/system-connections"} {
		testutil.Must(t, os.MkdirAll(filepath.Join(m.Root, dir), 0o755))
		for i := range 5 { // five kills
			stale = append(stale, filepath.Join(m.Root, dir, ".nodereg-"+string(rune('1'+i))+"0417.tmp"))
		}
		kept = append(kept, filepath.Join(m.Root, dir, ".nodereg-admin.tmp"))
	}
	for _, p := range append(append([]string{}, stale...), kept...) {
		testutil.Must(t, os.WriteFile(p, []byte("half a file"), 0o600))
	}
	env := append([]string{host.EnvNmstatectl + "=" + stub}, m.Stub().Env()...)
	code, _, final := runBinary(t, bin, env, "--root", m.Root, "--deadline", "5s", "--network-timeout", "5s")
	wantFinal(t, code, 0, final, "registration complete")
	for _, p := range stale {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("stale temp file %s still there", p)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s is not the agent's temp file and went: %v", p, err)
		}
	}
}

// TestDeadlineBoundsLockWait: --deadline bounds the wait
// for a state lock another run holds (default 30 s): a 1 s deadline ends
// the run with 75 well before the default wait would.
func TestDeadlineBoundsLockWait(t *testing.T) {
	// Parallel: it waits on a lock in a scratch root of its own.
	t.Parallel()
	bin := testbin.Build(t, "./cmd/agent")
	m := node.New(t, "52:54:00:15:00:0d", "http://127.0.0.1:1/elemental/registration/tok", "")
	held, err := statelock.Acquire(t.Context(), filepath.Join(m.Root, filepath.Dir(node.StatePath), statelock.Name), 0)
	testutil.Must(t, err)
	defer held.Release()
	start := time.Now()
	code, _, final := runBinary(t, bin, nil, "--root", m.Root, "--deadline", "1s")
	took := time.Since(start)
	wantFinal(t, code, 75, final, "not registered: try again later", "phase=state")
	if took >= 15*time.Second {
		t.Errorf("the run waited %s for the lock; --deadline 1s bounds it", took.Round(time.Second))
	}
}
