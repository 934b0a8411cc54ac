// Command relay is the lab's userspace stand-in for tc netem, for kernels
// without sch_netem. It accepts TCP connections and forwards each to one
// upstream address, delaying every segment in both directions and charging
// a random share of segments a retransmission timeout, the way a TCP
// connection lives through packet loss: the bytes arrive late, never out of
// order and never missing.
//
// It prints "listening on ADDR" on stdout once it accepts connections, and
// on SIGTERM or SIGINT one summary line on stderr:
//
//	relay: conns=N segments=N lost=N
package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// impairment is what the relay does to each connection.
type impairment struct {
	delay time.Duration // one way, per segment
	loss  float64       // chance that one transmission of a segment is lost
	rto   time.Duration // first retransmission timeout; doubles per repeated loss
	syn   time.Duration // retransmission timeout of a lost SYN
	mss   int           // bytes per segment
	seed  uint64
}

// stats are the relay's totals over all connections.
type stats struct {
	conns, segments, lost atomic.Int64
}

func (s *stats) String() string {
	return fmt.Sprintf("relay: conns=%d segments=%d lost=%d", s.conns.Load(), s.segments.Load(), s.lost.Load())
}

// lossPenalty draws the losses of one segment: each transmission is lost
// with the configured chance, and every loss costs the current timeout,
// which doubles for the next attempt (exponential backoff). The number of
// draws is bounded so a loss of 1 cannot hang the relay.
func (imp impairment) lossPenalty(rng *rand.Rand, first time.Duration) (time.Duration, int) {
	var extra time.Duration
	n := 0
	for rto := first; n < 8 && imp.loss > 0 && rng.Float64() < imp.loss; rto *= 2 {
		extra += rto
		n++
	}
	return extra, n
}

// segment is a piece of the stream and the moment it may be delivered.
type segment struct {
	due  time.Time
	data []byte
}

// pipe copies src to dst in segments, each delivered one delay after it was
// read plus its loss penalty, and never before the segment ahead of it
// (TCP delivers in order, so a lost segment holds back the ones behind it).
// At EOF on src it half-closes dst once everything before has been written.
func pipe(dst, src *net.TCPConn, imp impairment, rng *rand.Rand, st *stats) {
	q := make(chan segment, 256)
	go func() {
		defer close(q)
		var last time.Time
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			now := time.Now()
			for off := 0; off < n; off += imp.mss {
				end := min(off+imp.mss, n)
				extra, lost := imp.lossPenalty(rng, imp.rto)
				st.segments.Add(1)
				st.lost.Add(int64(lost))
				due := now.Add(imp.delay + extra)
				if due.Before(last) {
					due = last
				}
				last = due
				q <- segment{due: due, data: append([]byte(nil), buf[off:end]...)}
			}
			if err != nil {
				return
			}
		}
	}()
	var failed bool
	for s := range q {
		if failed {
			continue // drain, so the reader never blocks on a dead writer
		}
		time.Sleep(time.Until(s.due))
		if _, err := dst.Write(s.data); err != nil {
			failed = true
			_ = src.Close() // the peer is gone: stop reading the other side
		}
	}
	if !failed {
		_ = dst.CloseWrite()
	}
}

// serve relays one accepted connection. n numbers the connection, so each
// one draws from its own deterministic stream whatever the others do.
func serve(c *net.TCPConn, upstream string, n uint64, imp impairment, st *stats) {
	defer c.Close()
	up := rand.New(rand.NewPCG(imp.seed, 2*n))
	down := rand.New(rand.NewPCG(imp.seed, 2*n+1))
	// The client's handshake with the relay is instant; the emulated one
	// costs a round trip, plus the SYN timeout per lost SYN.
	extra, lost := imp.lossPenalty(up, imp.syn)
	st.lost.Add(int64(lost))
	time.Sleep(2*imp.delay + extra)
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relay: conn %d: dial %s: %v\n", n, upstream, err)
		return
	}
	uc := u.(*net.TCPConn)
	defer uc.Close()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pipe(uc, c, imp, up, st) }()
	go func() { defer wg.Done(); pipe(c, uc, imp, down, st) }()
	wg.Wait()
}

func run(ln *net.TCPListener, upstream string, imp impairment, st *stats) error {
	for n := uint64(0); ; n++ {
		c, err := ln.AcceptTCP()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("relay: accept: %w", err)
		}
		st.conns.Add(1)
		go serve(c, upstream, n, imp, st)
	}
}

func main() {
	var (
		listen   = flag.String("listen", "127.0.0.1:0", "address to accept connections on")
		upstream = flag.String("to", "", "address to forward every connection to")
		imp      impairment
	)
	flag.DurationVar(&imp.delay, "delay", 100*time.Millisecond, "one-way delay per segment")
	flag.Float64Var(&imp.loss, "loss", 0.05, "chance that a transmission of a segment is lost")
	flag.DurationVar(&imp.rto, "rto", 200*time.Millisecond, "first retransmission timeout (Linux minimum RTO)")
	flag.DurationVar(&imp.syn, "syn-rto", time.Second, "retransmission timeout of a lost SYN (Linux initial RTO)")
	flag.IntVar(&imp.mss, "mss", 1448, "segment size in bytes")
	flag.Uint64Var(&imp.seed, "seed", 1, "seed of the loss draws")
	flag.Parse()
	if *upstream == "" || imp.mss <= 0 || imp.loss < 0 || imp.loss > 1 {
		fmt.Fprintln(os.Stderr, "relay: need -to ADDR, -mss > 0 and 0 <= -loss <= 1")
		os.Exit(2)
	}
	l, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "relay: listen: %v\n", err)
		os.Exit(1)
	}
	ln := l.(*net.TCPListener)
	st := &stats{}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	go func() { <-sig; _ = ln.Close() }()
	fmt.Printf("listening on %s\n", ln.Addr())
	err = run(ln, *upstream, imp, st)
	fmt.Fprintln(os.Stderr, st)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
