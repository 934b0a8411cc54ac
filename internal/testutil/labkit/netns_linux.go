package labkit

// The lab's network namespaces: one named by the lab (AddNS) or a pair
// created under a random name (so parallel tests, runs and worktrees never
// collide), removed when the test ends, iproute2 commands and processes
// inside them (IP, InNS), and code run on an OS thread that has entered
// one (Enter, RunInNS, DialIn). Each test builds its own topology (links,
// MACs, addresses) with IP.

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Pair names two empty namespaces: the machine under test's and a peer's.
type Pair struct{ Node, Peer string }

// NewPair creates the namespaces prefix-<pid>-<random>-n and -p and
// registers their removal. It skips the test, naming who needed them, when
// it cannot: not root, no ip command, or namespaces unavailable.
func NewPair(t testing.TB, prefix, who string) *Pair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("%s: creating network namespaces needs root", who)
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skipf("%s: needs iproute2's ip", who)
	}
	id := fmt.Sprintf("%s-%d-%06x", prefix, os.Getpid(), rand.N(1<<24))
	p := &Pair{Node: id + "-n", Peer: id + "-p"}
	AddNS(t, p.Node, who)
	AddNS(t, p.Peer, who)
	return p
}

// AddNS creates the named namespace ns for the rest of the test (every lab
// makes its namespaces here): it skips the test, naming who needed it,
// where namespaces cannot be made, and fails it if ns cannot be removed
// at the end.
func AddNS(t testing.TB, ns, who string) {
	t.Helper()
	if err := CreateNS(ns); err != nil {
		t.Skipf("%s: network namespaces unavailable: %v", who, err)
	}
	t.Cleanup(func() {
		if err := DeleteNS(ns); err != nil {
			t.Error(err)
		}
	})
}

// CreateNS is AddNS for a TestMain, with no test to end it: the caller
// deletes the namespace (DeleteNS).
func CreateNS(ns string) error {
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// DeleteNS removes namespace ns, with the links still in it.
func DeleteNS(ns string) error {
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("removing namespace %s: %v: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// InNS is argv run inside namespace ns: `ip netns exec ns argv...`, for a
// program started as a process of its own.
func InNS(ns string, argv ...string) []string {
	return append([]string{"ip", "netns", "exec", ns}, argv...)
}

// IP runs `ip -n ns args...` and fails the test if it fails.
func IP(t testing.TB, ns string, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", ns}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("ip -n %s %s: %v: %s", ns, strings.Join(args, " "), err, out)
	}
}

// Enter runs fn inside namespace ns (see RunInNS) and fails the test if it cannot
// enter it. Call it from the test's goroutine only.
func Enter(t testing.TB, ns string, fn func()) {
	t.Helper()
	if err := RunInNS(ns, fn); err != nil {
		t.Fatal(err)
	}
}

// RunInNS runs fn on an OS thread that has entered namespace ns and waits for
// it. The thread is never handed back to the scheduler (its goroutine ends
// locked, so Go discards it), so no other goroutine runs in the namespace
// by accident. It returns the error of entering ns, so any goroutine may
// call it.
func RunInNS(ns string, fn func()) error {
	var setErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			setErr = err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			setErr = fmt.Errorf("setns %s: %w", ns, err)
			return
		}
		fn()
	}()
	<-done
	return setErr
}
