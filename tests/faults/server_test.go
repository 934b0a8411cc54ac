package faults

import (
	"bufio"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/protocol"
)

// Steps of the conversation, in the order a nodereg agent meets them when
// the server announces the explicit network-config exchange.
const (
	stepUpgrade     = "upgrade"
	stepAuth        = "auth"
	stepVersion     = "version"
	stepSmbios      = "smbios"
	stepSystemData  = "system-data"
	stepAnnotations = "annotations"
	stepLabels      = "labels"
	stepGet         = "get"
	stepConfig      = "config"
	stepNetwork     = "network-config"
)

var allSteps = []string{stepUpgrade, stepAuth, stepVersion, stepSmbios, stepSystemData, stepAnnotations, stepLabels, stepGet, stepConfig, stepNetwork}

type fault string

const (
	faultClose    fault = "close"
	faultGarbage  fault = "garbage"
	faultUnknown  fault = "unknown-type"
	faultOversize fault = "oversized"
	faultStall    fault = "stall"
)

var allFaults = []fault{faultClose, faultGarbage, faultUnknown, faultOversize, faultStall}

// networkJSON is what MsgNetworkConfig answers: cmd/regserver/example.yaml's
// nmstate template with the address filled in.
const networkJSON = `{"configurator":"nmstate","ipAddresses":{"inventory-ip":"192.168.122.150"},"config":{` +
	`"interfaces":[{"name":"enp1s0","type":"ethernet","state":"up","ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"{inventory-ip}","prefix-length":24}]},"ipv6":{"enabled":false}}],` +
	`"routes":{"config":[{"destination":"0.0.0.0/0","next-hop-interface":"enp1s0","next-hop-address":"192.168.122.1","metric":150,"table-id":254}]},` +
	`"dns-resolver":{"config":{"server":["192.168.122.1"],"search":[]}}}}`

// faultServer speaks the server side of the registration protocol by hand,
// byte for byte as docs/protocol.md describes it, and breaks it at one step:
// on the first time the step is reached (once) or every time.
type faultServer struct {
	step  string
	fault fault
	once  bool
	// stall is how long a stalled step holds the connection at most; the
	// client's deadline is far shorter.
	stall time.Duration

	mu    sync.Mutex
	armed bool // faults fire only once armed
	hits  map[string]int
	done  chan struct{} // closed by close(): ends every stall
}

func newFaultServer(step string, f fault, once bool) *faultServer {
	return &faultServer{step: step, fault: f, once: once, armed: true, stall: 30 * time.Second, hits: map[string]int{}, done: make(chan struct{})}
}

func (s *faultServer) arm(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.armed = on
}

func (s *faultServer) close() { close(s.done) }

// trip reports whether the fault fires at step now.
func (s *faultServer) trip(step string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.armed || step != s.step {
		return false
	}
	s.hits[step]++
	return !s.once || s.hits[step] == 1
}

func (s *faultServer) Hits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[s.step]
}

func (s *faultServer) wait(c net.Conn) {
	// Hold until the client gives up (its read deadline closes the
	// connection) or the test ends.
	t := time.NewTimer(s.stall)
	defer t.Stop()
	closed := make(chan struct{})
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := c.Read(buf); err != nil {
				close(closed)
				return
			}
		}
	}()
	select {
	case <-t.C:
	case <-s.done:
	case <-closed:
	}
}

func (s *faultServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		// The agent's reachability check after a live apply.
		w.WriteHeader(http.StatusOK)
		return
	}
	if s.trip(stepUpgrade) {
		s.breakUpgrade(w)
		return
	}
	up := websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(time.Minute))
	if !strings.HasPrefix(r.Header.Get("Authorization"), protocol.PrefixPlain) {
		return
	}
	if !s.send(ws, stepAuth, protocol.MsgReady, nil) {
		return
	}
	for {
		mt, b, err := ws.ReadMessage()
		if err != nil || mt != websocket.BinaryMessage || len(b) == 0 {
			return
		}
		var ok bool
		switch protocol.MsgType(b[0]) {
		case protocol.MsgVersion:
			ok = s.send(ws, stepVersion, protocol.MsgVersion, []byte{protocol.Version})
		case protocol.MsgSmbios:
			ok = s.send(ws, stepSmbios, protocol.MsgReady, nil)
		case protocol.MsgSystemDataV2:
			ok = s.send(ws, stepSystemData, protocol.MsgReady, nil)
		case protocol.MsgAnnotations:
			ok = s.send(ws, stepAnnotations, protocol.MsgReady, nil)
		case protocol.MsgLabels:
			ok = s.send(ws, stepLabels, protocol.MsgReady, nil)
		case protocol.MsgUpdate:
			ok = s.send(ws, "update", protocol.MsgReady, nil)
		case protocol.MsgGet:
			if s.trip(stepGet) {
				s.breakFrame(ws)
				return
			}
			s.sendConfig(ws, r)
			return
		case protocol.MsgNetworkConfig:
			s.send(ws, stepNetwork, protocol.MsgNetworkConfig, []byte(networkJSON))
			return
		default:
			return
		}
		if !ok {
			return
		}
	}
}

// send writes one message unless the fault fires at step; false ends the
// connection.
func (s *faultServer) send(ws *websocket.Conn, step string, t protocol.MsgType, p []byte) bool {
	if s.trip(step) {
		s.breakFrame(ws)
		return false
	}
	return ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(t, p)) == nil
}

// breakFrame replaces one whole message with the fault.
func (s *faultServer) breakFrame(ws *websocket.Conn) {
	c := ws.UnderlyingConn()
	switch s.fault {
	case faultClose:
		c.Close()
	case faultGarbage:
		// Not a websocket frame at all: reserved bits set, bogus opcode.
		_, _ = c.Write([]byte("\x7f\xffHTTP/1.1 200 OK\r\n\r\n<html>garbage</html>"))
		s.wait(c)
	case faultUnknown:
		_ = ws.WriteMessage(websocket.BinaryMessage, []byte{0x7f, 'h', 'i'})
		s.wait(c)
	case faultOversize:
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgReady, make([]byte, protocol.DefaultMaxFrame)))
		s.wait(c)
	case faultStall:
		s.wait(c)
	}
}

// sendConfig answers MsgGet; at the config step the frame is right but its
// content is the fault.
func (s *faultServer) sendConfig(ws *websocket.Conn, r *http.Request) {
	url := "http://" + r.Host + r.URL.Path
	good := "elemental:\n    registration:\n        url: " + url + "\n        auth: mac\n" + protocol.AnnounceKey + ": true\n"
	if !s.trip(stepConfig) {
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgConfig, []byte(good)))
		return
	}
	c := ws.UnderlyingConn()
	switch s.fault {
	case faultClose:
		// A torn message: the header promises 1000 bytes, 10 arrive.
		_, _ = c.Write(append([]byte{0x82, 0x7e, 0x03, 0xe8, byte(protocol.MsgConfig)}, "elemental:"...))
		c.Close()
	case faultGarbage:
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgConfig, []byte("elemental: [\n\x00\x01 {{")))
		s.wait(c)
	case faultUnknown:
		// A configurator nobody knows: hostile or broken, not transient.
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgConfig, []byte(good+"configurator: teleport\nipAddresses: {ip: 10.0.0.1}\nconfig: {x: 1}\n")))
		s.wait(c)
	case faultOversize:
		// Small on the wire, a billion laughs once expanded.
		_ = ws.WriteMessage(websocket.BinaryMessage, protocol.EncodeFrame(protocol.MsgConfig, laughs(9)))
		s.wait(c)
	case faultStall:
		_, _ = c.Write([]byte{0x82, 0x7e, 0x03, 0xe8, byte(protocol.MsgConfig)})
		s.wait(c)
	}
}

// breakUpgrade answers the HTTP upgrade with the fault.
func (s *faultServer) breakUpgrade(w http.ResponseWriter) {
	if s.fault == faultUnknown {
		// A reply that is HTTP but no upgrade: an unknown answer.
		http.Error(w, "I'm a teapot", http.StatusTeapot)
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return
	}
	c, _, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	switch s.fault {
	case faultClose:
	case faultGarbage:
		_, _ = c.Write([]byte("\x00\x01\x02 not http at all \xff\xfe\r\n\r\n"))
	case faultOversize:
		bw := bufio.NewWriterSize(c, 64<<10)
		_, _ = bw.WriteString("HTTP/1.1 101 Switching Protocols\r\nX-Pad: ")
		_, _ = bw.WriteString(strings.Repeat("a", 8<<20))
		_, _ = bw.WriteString("\r\n\r\n")
		_ = bw.Flush()
		s.wait(c)
	case faultStall:
		s.wait(c)
	}
}

// laughs is a "billion laughs" YAML document: levels of ten aliases each,
// hung under the network config.
func laughs(levels int) []byte {
	var b strings.Builder
	b.WriteString("configurator: nmstate\nl0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < levels; i++ {
		b.WriteString("l" + itoa(i) + ": &l" + itoa(i) + " [")
		for j := 0; j < 10; j++ {
			if j > 0 {
				b.WriteString(", ")
			}
			b.WriteString("*l" + itoa(i-1))
		}
		b.WriteString("]\n")
	}
	b.WriteString("config: {interfaces: *l" + itoa(levels-1) + "}\n")
	return []byte(b.String())
}

func itoa(i int) string { return strconv.Itoa(i) }
