package bootstrap

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/nodereg/nodereg/internal/testutil/labkit"
)

// lab is two network namespaces joined by a veth pair: "node" (nodeIf,
// up, no address: the machine probing) and "peer" (peerIf, holding
// heldAddr/24: the kernel there answers ARP for it). Names start with
// nrbs- plus a random part (labkit.NewPair) so parallel runs and other
// worktrees' labs never collide, and only addresses inside these
// namespaces are probed.
type lab struct {
	node, peer string
}

const (
	nodeIf, peerIf = "nrbs0", "nrbs1"
	nodeMAC        = "02:00:5e:10:00:01"
	peerMAC        = "02:00:5e:10:00:02"
	heldAddr       = "10.231.0.5"
	freeAddr       = "10.231.0.6"
)

func newLab(t *testing.T) *lab {
	t.Helper()
	p := labkit.NewPair(t, "nrbs", "ARP probe tests")
	l := &lab{node: p.Node, peer: p.Peer}
	labkit.IP(t, l.node, "link", "add", nodeIf, "address", nodeMAC, "type", "veth", "peer", "name", peerIf, "address", peerMAC, "netns", l.peer)
	labkit.IP(t, l.node, "link", "set", nodeIf, "up")
	labkit.IP(t, l.peer, "addr", "add", heldAddr+"/24", "dev", peerIf)
	labkit.IP(t, l.peer, "link", "set", peerIf, "up")
	// The kernel reports carrier a moment after both ends are up.
	for _, side := range []struct{ ns, iface string }{{l.node, nodeIf}, {l.peer, peerIf}} {
		var err error
		labkit.Enter(t, side.ns, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = LinkReady(ctx, side.iface)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// fastProber keeps RFC 5227's shape (three probes, a listen after the last)
// on a shorter clock; a veth answers within microseconds.
func fastProber() *ARPProber {
	return &ARPProber{ProbeWait: 0, ProbeNum: 3, ProbeMin: 50e6, ProbeMax: 100e6, AnnounceWait: 300e6}
}

func probeIn(t *testing.T, ns, iface, addr string) (ProbeResult, error) {
	t.Helper()
	var res ProbeResult
	var err error
	labkit.Enter(t, ns, func() {
		res, err = fastProber().Probe(context.Background(), iface, netip.MustParseAddr(addr))
	})
	return res, err
}

func TestARPProbeFindsHolder(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	res, err := probeIn(t, l.node, nodeIf, heldAddr)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Taken || res.Holder.String() != peerMAC {
		t.Fatalf("probe of %s held by %s: got taken=%v holder=%v", heldAddr, peerMAC, res.Taken, res.Holder)
	}
}

func TestARPProbeFreeAddress(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	res, err := probeIn(t, l.node, nodeIf, freeAddr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Taken {
		t.Fatalf("probe of free %s: reported taken by %v", freeAddr, res.Holder)
	}
}

// Two machines probing one address at the same time must not both take it
// (RFC 5227 2.1.1): whichever hears the other's probe first backs off
// (and stops probing, so the other may well go ahead), and the one that
// backs off names the other as holder.
func TestARPProbeSimultaneousProbesConflict(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	const contested = "10.231.0.9"
	var wg sync.WaitGroup
	results := map[string]ProbeResult{}
	var mu sync.Mutex
	for _, side := range []struct{ ns, iface string }{{l.node, nodeIf}, {l.peer, peerIf}} {
		wg.Go(func() {
			p := &ARPProber{ProbeWait: 0, ProbeNum: 4, ProbeMin: 100e6, ProbeMax: 100e6, AnnounceWait: 500e6}
			var res ProbeResult
			var err error
			if nsErr := labkit.RunInNS(side.ns, func() { res, err = p.Probe(context.Background(), side.iface, netip.MustParseAddr(contested)) }); nsErr != nil {
				t.Error(nsErr)
			}
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			results[side.iface] = res
			mu.Unlock()
		})
	}
	wg.Wait()
	n, p := results[nodeIf], results[peerIf]
	if !n.Taken && !p.Taken {
		t.Fatalf("both sides found %s free while probing it at the same time", contested)
	}
	if n.Taken && n.Holder.String() != peerMAC {
		t.Errorf("node side backed off naming %v, want %s", n.Holder, peerMAC)
	}
	if p.Taken && p.Holder.String() != nodeMAC {
		t.Errorf("peer side backed off naming %v, want %s", p.Holder, nodeMAC)
	}
}

func TestARPProbeRefusesDownOrMissingInterface(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	labkit.IP(t, l.node, "link", "add", "nrbsdown", "type", "veth", "peer", "name", "nrbsdown1")
	if _, err := probeIn(t, l.node, "nrbsdown", freeAddr); !errors.Is(err, ErrLinkDown) {
		t.Errorf("probe on a down interface: %v, want ErrLinkDown", err)
	}
	_, err := probeIn(t, l.node, "nrbsnone", freeAddr)
	if err == nil || !strings.Contains(err.Error(), "nrbsnone") {
		t.Errorf("probe on a missing interface: %v, want an error naming it", err)
	}
}

func TestARPProbeStopsOnCancel(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var err error
	labkit.Enter(t, l.node, func() {
		_, err = (&ARPProber{}).Probe(ctx, nodeIf, netip.MustParseAddr(freeAddr))
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled probe: %v, want context.Canceled", err)
	}
}

// A link without carrier would drop our probes and answer nothing: refused.
// LinkReady raises a down link and waits for the carrier.
func TestProbeNeedsCarrierAndLinkReadyRaisesTheLink(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	labkit.IP(t, l.node, "link", "add", "nrbsa", "type", "veth", "peer", "name", "nrbsb")
	labkit.IP(t, l.node, "link", "set", "nrbsa", "up") // nrbsb stays down: no carrier on nrbsa
	if _, err := probeIn(t, l.node, "nrbsa", freeAddr); !errors.Is(err, ErrNoCarrier) {
		t.Errorf("probe without carrier: %v, want ErrNoCarrier", err)
	}
	var raised bool
	var err error
	labkit.Enter(t, l.node, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		raised, err = LinkReady(ctx, "nrbsa")
	})
	if raised || !errors.Is(err, ErrNoCarrier) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("LinkReady on an up link whose peer is down: raised=%v %v", raised, err)
	}
	labkit.Enter(t, l.node, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raised, err = LinkReady(ctx, "nrbsb")
	})
	if !raised || err != nil {
		t.Fatalf("LinkReady on the down end: raised=%v %v", raised, err)
	}
	// Each end sees carrier on its own schedule.
	labkit.Enter(t, l.node, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		raised, err = LinkReady(ctx, "nrbsa")
	})
	if raised || err != nil {
		t.Fatalf("LinkReady on the up end once its peer is up: raised=%v %v", raised, err)
	}
	if _, err := probeIn(t, l.node, "nrbsa", freeAddr); err != nil {
		t.Errorf("probe once both ends are up: %v", err)
	}
}

// flood sends ARP requests that name neither the node nor the probed
// address to the node until the returned stop is called: a busy segment
// the probe must not get stuck on. One read costs the probe less than one
// send costs the sender, so each frame is sent on a veth of its own
// (nrbsf0, in the peer namespace) and tc copies it copies times onto
// peerIf: the node then receives faster than it can read.
func (l *lab) flood(t *testing.T, copies int) (stop func()) {
	t.Helper()
	labkit.IP(t, l.peer, "link", "add", "nrbsf0", "type", "veth", "peer", "name", "nrbsf1")
	labkit.IP(t, l.peer, "link", "set", "nrbsf0", "up")
	labkit.IP(t, l.peer, "link", "set", "nrbsf1", "up")
	tc := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("tc", append([]string{"-n", l.peer}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("tc -n %s %s: %v: %s", l.peer, strings.Join(args, " "), err, out)
		}
	}
	tc("qdisc", "add", "dev", "nrbsf0", "clsact")
	filter := []string{"filter", "add", "dev", "nrbsf0", "egress", "protocol", "all", "u32", "match", "u32", "0", "0"}
	for range copies {
		filter = append(filter, "action", "mirred", "egress", "mirror", "dev", peerIf)
	}
	tc(filter...)

	done := make(chan struct{})
	stopped := make(chan struct{})
	started := make(chan error, 1)
	peer, _ := net.ParseMAC(peerMAC)
	frame := arpProbe(peer, netip.MustParseAddr("10.231.0.8").As4())
	copy(frame[14:18], netip.MustParseAddr("10.231.0.7").AsSlice()) // a sender IP of its own: no conflict
	go func() {
		defer close(stopped)
		err := labkit.RunInNS(l.peer, func() {
			proto := htons(unix.ETH_P_ARP)
			fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, int(proto))
			if err != nil {
				started <- err
				return
			}
			defer unix.Close(fd)
			ifi, err := net.InterfaceByName("nrbsf0")
			if err != nil {
				started <- err
				return
			}
			to := &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index, Halen: 6, Addr: [8]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}}
			started <- nil
			for {
				select {
				case <-done:
					return
				default:
				}
				for range 16 {
					_ = unix.Sendto(fd, frame, 0, to) // ENOBUFS under load: keep going
				}
			}
		})
		if err != nil {
			started <- err
		}
	}()
	if err := <-started; err != nil {
		t.Fatalf("flooding from %s: %v", l.peer, err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { close(done); <-stopped }) }
	t.Cleanup(stop)
	return stop
}

// A busy segment must not hold the probe past a cancel (SIGTERM) or past
// its own timing: the frames are read in bounded batches between checks.
// On a small machine the probe reads faster than a veth flood arrives, so
// this checks the whole path; TestFrameReaderStopsOnEndlessTraffic is the
// case of a queue that never runs dry.
func TestARPProbeEndsUnderFlood(t *testing.T) {
	// Parallel: each lab has namespaces of its own.
	t.Parallel()
	l := newLab(t)
	stop := l.flood(t, 32)
	probe := func(ctx context.Context, p *ARPProber) (took time.Duration, err error) {
		done := make(chan error, 1)
		start := time.Now()
		go func() {
			if err := labkit.RunInNS(l.node, func() {
				_, err := p.Probe(ctx, nodeIf, netip.MustParseAddr(freeAddr))
				done <- err
			}); err != nil {
				done <- err
			}
		}()
		select {
		case err := <-done:
			return time.Since(start), err
		case <-time.After(10 * time.Second):
			stop() // lets the stuck probe end so the lab can be removed
			<-done
			return time.Since(start), errors.New("probe still running 10 s into a flood")
		}
	}

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(300*time.Millisecond, cancel)
		// Left alone this probe would listen for a minute.
		slow := &ARPProber{ProbeWait: 0, ProbeNum: 3, ProbeMin: 30e9, ProbeMax: 30e9, AnnounceWait: 2e9}
		// The cancel comes at 0.3 s; the bound is a second past it.
		if took, err := probe(ctx, slow); !errors.Is(err, context.Canceled) || took > 1300*time.Millisecond {
			t.Fatalf("cancelled probe under flood: %v after %v, want context.Canceled within 1.3 s", err, took)
		}
	})
	t.Run("timing", func(t *testing.T) {
		// fastProber is done at most 0.5 s after its start; the bound is a
		// second past it.
		took, err := probe(context.Background(), fastProber())
		if err != nil || took > 1500*time.Millisecond {
			t.Fatalf("probe under flood: %v after %v, want nil within 1.5 s", err, took)
		}
	})
}

// The reader of a socket that never runs dry (a segment flooded faster
// than the probe reads, which a veth on a loaded machine cannot always
// produce, hence a source of frames here) stops at a cancel and at the
// deadline, within one batch.
func TestFrameReaderStopsOnEndlessTraffic(t *testing.T) {
	peer, _ := net.ParseMAC(peerMAC)
	own, _ := net.ParseMAC(nodeMAC)
	other := arpProbe(peer, netip.MustParseAddr("10.231.0.8").As4())
	const ifindex = 7
	// endless hands out a frame that is no conflict on every call; after
	// limit calls it fails, so a reader that never stops fails the test
	// instead of hanging it; onCall runs before each frame.
	endless := func(limit int, onCall func(calls int)) (*frameReader, *int) {
		calls := 0
		return &frameReader{
			recv: func(b []byte) (int, unix.Sockaddr, error) {
				calls++
				if calls > limit {
					return 0, nil, errors.New("still reading")
				}
				onCall(calls)
				return copy(b, other), &unix.SockaddrLinklayer{Ifindex: ifindex}, nil
			},
			buf:     make([]byte, 1500),
			ifindex: ifindex,
			own:     own,
			target:  netip.MustParseAddr(freeAddr).As4(),
		}, &calls
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, calls := endless(1e6, func(n int) {
		if n == 10 {
			cancel()
		}
	})
	if _, taken, err := r.read(ctx, time.Now().Add(time.Hour)); err != nil || taken {
		t.Fatalf("read after a cancel: taken=%v %v", taken, err)
	}
	if *calls != 10 {
		t.Errorf("read %d frames, want to stop at the cancel (10)", *calls)
	}

	until := time.Now().Add(20 * time.Millisecond)
	r, calls = endless(1e6, func(int) { time.Sleep(time.Millisecond) })
	if _, taken, err := r.read(context.Background(), until); err != nil || taken {
		t.Fatalf("read past the deadline: taken=%v %v", taken, err)
	}
	if time.Now().Before(until) && *calls != maxFramesPerPoll {
		t.Errorf("returned before the deadline after %d frames, want a full batch of %d", *calls, maxFramesPerPoll)
	}

	r, calls = endless(1e6, func(int) {})
	if _, _, err := r.read(context.Background(), time.Now().Add(time.Hour)); err != nil || *calls != maxFramesPerPoll {
		t.Errorf("one batch read %d frames (%v), want %d", *calls, err, maxFramesPerPoll)
	}
}
