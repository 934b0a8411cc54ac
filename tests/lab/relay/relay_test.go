package main

import (
	"bytes"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"
)

func TestLossPenalty(t *testing.T) {
	imp := impairment{loss: 1, rto: 200 * time.Millisecond}
	extra, n := imp.lossPenalty(rand.New(rand.NewPCG(1, 0)), imp.rto)
	// Every attempt lost: 200+400+...+25600 ms, bounded at 8 attempts.
	if n != 8 || extra != 200*time.Millisecond*255 {
		t.Errorf("loss 1: %v over %d losses, want 51s over 8", extra, n)
	}
	imp.loss = 0
	if extra, n := imp.lossPenalty(rand.New(rand.NewPCG(1, 0)), imp.rto); n != 0 || extra != 0 {
		t.Errorf("loss 0: %v over %d losses", extra, n)
	}
	// The same seed gives the same draws.
	imp.loss = 0.05
	a, b := rand.New(rand.NewPCG(7, 3)), rand.New(rand.NewPCG(7, 3))
	var la, lb int
	for range 2000 {
		_, x := imp.lossPenalty(a, imp.rto)
		_, y := imp.lossPenalty(b, imp.rto)
		la, lb = la+x, lb+y
	}
	if la != lb || la == 0 {
		t.Errorf("seeded draws: %d and %d losses in 2000 segments", la, lb)
	}
}

// TestRelayKeepsTheStream: with heavy loss and small segments, every byte
// comes through in order both ways, and a half-close is passed on.
func TestRelayKeepsTheStream(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); c.Close() }()
		}
	}()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	st := &stats{}
	imp := impairment{delay: time.Millisecond, loss: 0.3, rto: time.Millisecond, syn: time.Millisecond, mss: 100, seed: 1}
	done := make(chan error, 1)
	go func() { done <- run(l.(*net.TCPListener), echo.Addr().String(), imp, st) }()

	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	want := make([]byte, 256<<10)
	r := rand.New(rand.NewPCG(2, 2))
	for i := range want {
		want[i] = byte(r.Uint32())
	}
	go func() {
		for off := 0; off < len(want); off += 3000 {
			if _, err := c.Write(want[off:min(off+3000, len(want))]); err != nil {
				return
			}
		}
		_ = c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(c) // ends only if the half-close went round
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("stream changed: %d bytes back of %d", len(got), len(want))
	}
	if st.conns.Load() != 1 || st.lost.Load() == 0 || st.segments.Load() < int64(2*len(want)/imp.mss) {
		t.Errorf("stats %s: want 1 connection, some losses, at least %d segments", st, 2*len(want)/imp.mss)
	}
	l.Close()
	if err := <-done; err != nil {
		t.Errorf("run after close: %v", err)
	}
}
