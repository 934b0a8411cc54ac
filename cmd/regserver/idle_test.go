package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/protocol"
)

// The idle-connection attack, scaled: 5,000 idle connections on the registration
// listener. The admin API answers at once (own listener, own limit), a
// registration still gets through (the idle connections are closed after
// --read-header-timeout, so their slots come back), and the server keeps
// its file descriptors.
func TestIdleConnectionsDoNotLockOut(t *testing.T) {
	const idle = 5000
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err == nil && l.Cur < 3*idle {
		l.Cur = min(l.Max, 3*idle)
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	if l.Cur < 2*idle+1000 {
		t.Fatalf("RLIMIT_NOFILE %d: this test needs %d descriptors (client and server side in one process)", l.Cur, 2*idle+1000)
	}
	rs := startRun(t, "--config", "example.yaml", "--no-tpm", "--read-header-timeout", "2s")
	addr := strings.TrimPrefix(rs.base, "http://")

	conns := make([]net.Conn, idle)
	var wg sync.WaitGroup
	errs := make(chan error, idle)
	for w := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < idle; i += 50 {
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					errs <- err
					return
				}
				conns[i] = c
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("opening idle connections: %v", err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	t.Logf("%d idle connections open", idle)

	start := time.Now()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := rs.adminGet(t, client, "/admin/pools")
	if err != nil {
		t.Fatalf("admin API under %d idle connections: %v", idle, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("admin API: %d", resp.StatusCode)
	}
	t.Logf("admin API answered in %s", time.Since(start).Round(time.Millisecond))

	start = time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	url := rs.base + "/elemental/registration/demo-keyfile-token"
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url, HandshakeTimeout: 50 * time.Second}, protocol.Plain{AuthKind: "mac", ID: "52:54:00:aa:bb:cc"})
	if err != nil {
		t.Fatalf("registration under %d idle connections: %v\n%s", idle, err, rs.stderr.String())
	}
	defer cc.Close()
	var cfg protocol.Config
	reply, err := cc.Register(ctx, &protocol.Payloads{SMBIOS: map[string]any{"System Information": map[string]any{"UUID": "idle-test"}}}, &cfg)
	if err != nil || reply.Network == nil || reply.Network.IPAddresses["inventory-ip"] == "" {
		t.Fatalf("registration: %+v, %v", reply, err)
	}
	t.Logf("registration answered in %s (%s)", time.Since(start).Round(time.Millisecond), reply.Network.IPAddresses["inventory-ip"])

	// The idle connections were closed by the server, not held.
	_ = conns[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conns[0].Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("idle connection still open after --read-header-timeout: %v", err)
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
