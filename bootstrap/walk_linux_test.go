package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/labkit"
	"github.com/nodereg/nodereg/internal/testutil/node"
)

// walkLab is two network namespaces joined by a veth pair: the node's
// (walkIf, up, no address) and a peer's holding every address of
// walkRange, so the kernel there answers each probe. Random names
// (labkit.NewPair): no collision with other runs or worktrees; only
// addresses inside these namespaces are probed.
type walkLab struct{ node, peer string }

const (
	walkIf    = "nrwk0"
	walkFirst = 5
	walkLast  = 24 // 10.231.0.5-10.231.0.24, all held
)

func walkAddr(i int) string { return fmt.Sprintf("10.231.0.%d", i) }

func newWalkLab(t *testing.T) *walkLab {
	t.Helper()
	p := labkit.NewPair(t, "nrwk", "the walk lab")
	l := &walkLab{node: p.Node, peer: p.Peer}
	labkit.IP(t, l.node, "link", "add", walkIf, "address", "02:00:5e:11:00:01", "type", "veth", "peer", "name", "nrwk1", "address", "02:00:5e:11:00:02", "netns", l.peer)
	labkit.IP(t, l.node, "link", "set", walkIf, "up")
	for i := walkFirst; i <= walkLast; i++ {
		labkit.IP(t, l.peer, "addr", "add", walkAddr(i)+"/24", "dev", "nrwk1")
	}
	labkit.IP(t, l.peer, "link", "set", "nrwk1", "up")
	return l
}

// extendLog keeps what the run asked systemd for.
type extendLog struct {
	mu  sync.Mutex
	got []time.Duration
}

func (e *extendLog) Extend(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, d)
}

// walkRun is the bootstrap config and the environment of one run's walk.
func walkRun(t *testing.T, root string, deadline time.Duration, n *extendLog) (*Config, Env) {
	t.Helper()
	c, err := FromConfigFile([]byte(node.BootstrapKeyfile{Key: "boot", ID: "boot", Iface: walkIf,
		Sources: "          range: {start: " + walkAddr(walkFirst) + ", end: " + walkAddr(walkLast+4) + ", prefix: 24}\n"}.File()))
	testutil.Must(t, err)
	var log testutil.Log
	env := Env{Files: host.Root(root), Deadline: deadline, Log: log.Entry(), ProbeInterval: os.Getenv(ProbeIntervalEnv)}
	if n != nil {
		env.Extend = n.Extend
	}
	return c, env
}

// walk is one run's address choice.
func walk(t *testing.T, root string, deadline time.Duration, n *extendLog) (*Plan, error) {
	c, env := walkRun(t, root, deadline, n)
	env.Log = testutil.TestLog(t)
	return chooseUp(context.Background(), c, env)
}

// A range walk longer than --deadline ends with exit 75 naming how far it
// got, after extending systemd's start timeout before every probe; the next
// run skips the addresses found held and walks on, and a finished choice
// forgets them.
func TestBootstrapWalkIsBoundedAndResumes(t *testing.T) {
	l := newWalkLab(t)
	t.Setenv(ProbeIntervalEnv, "200ms") // a probe takes at most 1 s
	root := t.TempDir()
	testutil.Must(t, os.MkdirAll(filepath.Join(root, "sys/class/dmi/id"), 0o755))
	testutil.Must(t, os.WriteFile(filepath.Join(root, "sys/class/dmi/id/product_uuid"), []byte("4c4c4544-0000-4000-8000-000000000001\n"), 0o444))

	first := &extendLog{}
	var err error
	labkit.Enter(t, l.node, func() {
		_, err = walk(t, root, 400*time.Millisecond, first)
	})
	// Exit 75 for a *DeadlineError: agent/exitcode's table (its own test).
	var de *DeadlineError
	if !errors.As(err, &de) {
		t.Fatalf("walk past the deadline: %v, want a *DeadlineError", err)
	}
	if de.Probed == 0 || de.Held != de.Probed || !de.Last.IsValid() || !strings.Contains(err.Error(), de.Last.String()+" on "+walkIf) {
		t.Fatalf("deadline error does not say how far the walk got: %+v: %v", de, err)
	}
	// One extension before the link wait, one before each probe (the
	// one the deadline cut short too): the probe's maximum (5 x 200 ms)
	// plus the margin.
	perProbe := time.Second + extendMargin
	if n := len(first.got); n < 1+de.Probed || n > 2+de.Probed || first.got[0] != linkReadyTimeout+extendMargin {
		t.Errorf("extensions %v for %d probes, want the link wait's then one per probe", first.got, de.Probed)
	}
	for _, d := range first.got[1:] {
		if d != perProbe {
			t.Errorf("extension %s before a probe, want %s", d, perProbe)
		}
	}
	if _, err := os.Stat(filepath.Join(root, heldFile)); err != nil {
		t.Fatalf("walk memory not kept: %v", err)
	}
	_, env := walkRun(t, root, 0, nil)
	held := readHeld(&env)
	if len(held) != de.Probed {
		t.Fatalf("memory holds %d addresses, the walk found %d held", len(held), de.Probed)
	}

	// The peer lets every address go: a walk from scratch would take the
	// first one it tries. The next run skips what the last one found held.
	labkit.IP(t, l.peer, "addr", "flush", "dev", "nrwk1")
	second := &extendLog{}
	var plan *Plan
	labkit.Enter(t, l.node, func() {
		plan, err = walk(t, root, time.Minute, second)
	})
	if err != nil {
		t.Fatalf("second walk: %v", err)
	}
	ch := plan.Choices[0]
	if _, known := held[ch.Address]; known || ch.Address == ch.FirstTry || len(ch.Taken) != len(held) {
		t.Errorf("second walk chose %s (first try %s, %d skipped as held), want the first address after the %d known held", ch.Address, ch.FirstTry, len(ch.Taken), len(held))
	}
	if len(second.got) != 2 {
		t.Errorf("second walk extended %v, want the link wait and one probe", second.got)
	}
	if _, err := os.Stat(filepath.Join(root, heldFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("walk memory left after a finished choice: %v", err)
	}
}
