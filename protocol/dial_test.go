package protocol

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// answering is a Go resolver whose every query is answered in-process with
// rcode (3 NXDOMAIN, 2 SERVFAIL): no packet leaves the test, whatever
// /etc/resolv.conf names. Queries counts the questions answered.
func answering(t *testing.T, rcode byte, queries *atomic.Int32) *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go func() {
			defer server.Close()
			for {
				// A net.Conn that is no PacketConn gets DNS over TCP's
				// framing: a two-byte length, then the message.
				var n uint16
				if err := binary.Read(server, binary.BigEndian, &n); err != nil {
					return
				}
				q := make([]byte, n)
				if _, err := io.ReadFull(server, q); err != nil || n < 12 {
					return
				}
				queries.Add(1)
				// The reply is the query (ID, question, EDNS record) with
				// QR and RA set and the rcode.
				q[2] |= 0x80
				q[3] = 0x80 | rcode
				if binary.Write(server, binary.BigEndian, n) != nil {
					return
				}
				if _, err := server.Write(q); err != nil {
					return
				}
			}
		}()
		return client, nil
	}}
}

// A registration host DNS says does not exist is ErrHostNotFound, named as
// DNS; a lookup that failed otherwise (SERVFAIL) is not.
func TestDialNamesAHostDNSDoesNotKnow(t *testing.T) {
	const host = "registration.nodereg-test.invalid"
	for _, c := range []struct {
		rcode    byte
		notFound bool
	}{{3, true}, {2, false}} {
		var queries atomic.Int32
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		o := DialOptions{URL: "http://" + host + ":9/elemental/registration/tok", Resolver: answering(t, c.rcode, &queries)}
		_, err := Dial(ctx, o, Plain{AuthKind: "mac", ID: "52:54:00:00:00:01"})
		cancel()
		if queries.Load() == 0 {
			t.Fatalf("rcode %d: the test's resolver was never asked: %v", c.rcode, err)
		}
		var se *StepError
		if !errors.As(err, &se) || se.Step != StepDial {
			t.Fatalf("rcode %d: err = %v, want a dial step error", c.rcode, err)
		}
		if got := errors.Is(err, ErrHostNotFound); got != c.notFound {
			t.Errorf("rcode %d: errors.Is(ErrHostNotFound) = %v, want %v: %v", c.rcode, got, c.notFound, err)
		}
		if c.notFound {
			for _, want := range []string{"DNS", `"` + host + `" does not resolve`, "registration URL"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message %q lacks %q", err, want)
				}
			}
		}
	}
}

// tpmLike sends the TPM scheme and waits for a challenge, as tpm's
// authenticator does; the server under test never gets that far.
type tpmLike struct{}

func (tpmLike) Kind() string                          { return "tpm" }
func (tpmLike) Token(context.Context) (string, error) { return PrefixTPM + "ek", nil }
func (tpmLike) Answer(context.Context, []byte) ([]byte, error) {
	return nil, errors.New("no challenge expected")
}
func (tpmLike) HasChallenge() bool { return true }

// A server that takes only PLAIN closes on a TPM client without a word
// (docs/protocol.md §1.5); the client names the likely mismatch and the
// kind it sent, and the error stays ErrAuth.
func TestDialNamesAnAuthKindMismatch(t *testing.T) {
	srv := startServer(t, &recordingHandler{}) // PLAIN only
	_, err := Dial(context.Background(), DialOptions{URL: srv.URL + "/elemental/registration/t"}, tpmLike{})
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("err = %v, want ErrAuth", err)
	}
	for _, want := range []string{"auth kind mismatch?", "elemental.registration.auth is tpm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q lacks %q", err, want)
		}
	}
	if !strings.HasPrefix(err.Error(), "auth: reading challenge: auth kind mismatch?") {
		t.Errorf("message %q does not lead with the mismatch", err)
	}
}

// TestDialFromLocalAddr: the connection leaves from LocalAddr, as the
// reboot-storm benchmark's machines (each a loopback address of its own)
// need; the listener is a bare TCP one that only records who called.
func TestDialFromLocalAddr(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	from := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			from <- err.Error()
			return
		}
		from <- c.RemoteAddr().(*net.TCPAddr).IP.String()
		c.Close()
	}()
	src := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 77)}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := Dial(ctx, DialOptions{URL: "http://" + ln.Addr().String() + "/elemental/registration/t", LocalAddr: src}, Plain{AuthKind: "mac", ID: "52:54:00:00:00:01"}); err == nil {
		t.Fatal("Dial succeeded against a listener that closes at once")
	}
	if got := <-from; got != "127.0.0.77" {
		t.Errorf("the server saw a connection from %s, want 127.0.0.77", got)
	}
}
