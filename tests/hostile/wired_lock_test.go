package hostile

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/internal/statelock"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// TestLockHeld: while another process holds the state lock, a run that
// may write waits its bound and ends with exit 75 naming the holder.
func TestLockHeld(t *testing.T) {
	// Parallel: it waits on a lock in a scratch root of its own.
	t.Parallel()
	m := node.New(t, "52:54:00:0c:06:01", "http://127.0.0.1:1/elemental/registration/tok", "")
	m.WriteState(t, "emulatedTPMSeed: 5\n")
	lockPath := filepath.Join(m.Root, filepath.Dir(node.StatePath), statelock.Name)
	held, err := statelock.Acquire(t.Context(), lockPath, 0)
	testutil.Must(t, err)
	defer held.Release()
	var log node.Log
	_, err = runAgent(t.Context(), m, &log, agent.Options{Deadline: time.Second, LockWait: 500 * time.Millisecond})
	var he *statelock.HeldError
	if !errors.As(err, &he) || he.PID != os.Getpid() || exitcode.Of(err) != exitcode.TempFail {
		t.Fatalf("got %v (exit %d)", err, exitcode.Of(err))
	}
	// The log names the holder: cmd/agent's final line leaves out the
	// error of a phase, so the phase's own line must carry it.
	if want := "held by process " + strconv.Itoa(os.Getpid()); !strings.Contains(log.String(), want) {
		t.Errorf("the log does not say %q:\n%s", want, log.String())
	}
	err = agent.ResetNetwork(t.Context(), agent.Options{Root: m.Root, Out: &log, Log: log.Entry(), LockWait: 500 * time.Millisecond})
	if !errors.As(err, &he) {
		t.Errorf("reset-network did not wait for the lock: %v", err)
	}
}
