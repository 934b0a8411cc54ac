package hostile

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/protocol"
)

// Silence is where a Server stops answering, holding the connection open.
type Silence string

const (
	Talkative      Silence = ""
	SilentTCP      Silence = "tcp"     // accepts TCP, never answers the HTTP request
	SilentUpgrade  Silence = "upgrade" // upgrades, never sends MsgReady
	SilentVersion  Silence = "version" // never answers MsgVersion
	SilentConfig   Silence = "config"  // never answers MsgGet
	SilentExplicit Silence = "network" // never answers MsgNetworkConfig
)

// Server is a registration server written by hand to attack the client:
// it speaks the protocol of docs/protocol.md, byte for byte, with payloads the
// test chooses. PLAIN authentication only; the zero value answers with an
// empty config.
type Server struct {
	// Token is the registration token it knows; a request for another
	// gets a 404 whose body names the token asked for, as upstream's does.
	Token string
	// Version it negotiates (default protocol.Version).
	Version byte
	// Config is the MsgConfig payload; Network the MsgNetworkConfig one
	// (nil: the connection is closed, as the seed PR's server did).
	Config, Network []byte
	Silence         Silence

	mu         sync.Mutex
	hits       int
	done       chan struct{}
	doneOnce   sync.Once
	silent     chan struct{}
	silentOnce sync.Once
	held       []net.Conn
}

// Hits is how many requests reached the server.
func (s *Server) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// SetNetwork replaces the MsgNetworkConfig payload of a started server,
// for the next request.
func (s *Server) SetNetwork(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Network = b
}

func (s *Server) network() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Network
}

// FellSilent is closed once the server has gone silent on a request (its
// Silence reached), so a test can act while the client waits on it.
func (s *Server) FellSilent() <-chan struct{} { return s.silence() }

func (s *Server) silence() chan struct{} { return s.made(&s.silent) }

func (s *Server) stop() chan struct{} { return s.made(&s.done) }

// made is *c, made on first use: a zero Server is ready to serve.
func (s *Server) made(c *chan struct{}) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if *c == nil {
		*c = make(chan struct{})
	}
	return *c
}

// Close ends every held connection.
func (s *Server) Close() {
	done := s.stop()
	s.doneOnce.Do(func() { close(done) })
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.held {
		c.Close()
	}
}

// Start serves s on loopback (TLS when tls) and returns the registration
// URL for token; everything stops at the end of the test.
func (s *Server) Start(t testing.TB, tls bool, token string) (url string, ca []byte) {
	t.Helper()
	if s.Silence == SilentTCP {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go s.hold(ln)
		t.Cleanup(func() { ln.Close(); s.Close() })
		scheme := "http"
		if tls {
			scheme = "https"
		}
		return scheme + "://" + ln.Addr().String() + "/elemental/registration/" + token, nil
	}
	hs := httptest.NewUnstartedServer(s)
	if tls {
		hs.StartTLS()
		ca = pemCert(hs.Certificate().Raw)
	} else {
		hs.Start()
	}
	t.Cleanup(func() { s.Close(); hs.Close() })
	return hs.URL + "/elemental/registration/" + token, ca
}

func (s *Server) hold(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.hits++
		s.held = append(s.held, c)
		s.mu.Unlock()
	}
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.hits++
	s.mu.Unlock()
	tok := r.URL.Path[strings.LastIndexByte(r.URL.Path, '/')+1:]
	if s.Token != "" && tok != s.Token {
		http.Error(w, "failed to find machine registration with registration token "+tok, http.StatusNotFound)
		return
	}
	ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	ws.SetReadLimit(protocol.DefaultMaxFrame)
	if s.Silence == SilentUpgrade {
		s.wait()
		return
	}
	send := func(t protocol.MsgType, p []byte) bool {
		return ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(t, p)) == nil
	}
	if !send(protocol.MsgReady, nil) {
		return
	}
	v := s.Version
	if v == 0 {
		v = protocol.Version
	}
	for {
		_, b, err := ws.ReadMessage()
		if err != nil || len(b) == 0 {
			return
		}
		switch protocol.MsgType(b[0]) {
		case protocol.MsgVersion:
			if s.Silence == SilentVersion {
				s.wait()
				return
			}
			send(protocol.MsgVersion, []byte{v})
		case protocol.MsgGet:
			if s.Silence == SilentConfig {
				s.wait()
				return
			}
			send(protocol.MsgConfig, s.Config)
			return
		case protocol.MsgNetworkConfig:
			if s.Silence == SilentExplicit {
				s.wait()
				return
			}
			if network := s.network(); network != nil {
				send(protocol.MsgNetworkConfig, network)
			}
			return
		default:
			if !send(protocol.MsgReady, nil) {
				return
			}
		}
	}
}

func (s *Server) wait() {
	silent := s.silence()
	s.silentOnce.Do(func() { close(silent) })
	<-s.stop()
}
