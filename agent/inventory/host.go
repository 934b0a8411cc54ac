package inventory

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/nic"
)

func interfaceAddrs(name string) ([]netip.Addr, error) {
	ifc, err := nic.ByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	as, err := ifc.Addrs()
	if err != nil {
		return nil, fmt.Errorf("addresses of %s: %w", name, err)
	}
	var out []netip.Addr
	for _, a := range as {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(ipn.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// logrusHandler sends ghw's own messages to our logger at debug level: its
// warnings (missing files on virtual machines) are expected and would
// otherwise go to stderr on every boot.
// Once its gate is closed (Collect returned), a module still running past
// the deadline logs nothing: the caller may have printed its final line.
type logrusHandler struct {
	log  *logrus.Entry
	gate *logGate
}

func (h logrusHandler) Enabled(context.Context, slog.Level) bool {
	return h.log.Logger.IsLevelEnabled(logrus.DebugLevel)
}

func (h logrusHandler) Handle(_ context.Context, r slog.Record) error {
	h.gate.do(func() { h.log.WithField("source", "ghw").Debug(r.Message) })
	return nil
}

// logGate lets lines through until it is closed; close waits for a line
// being written, so none comes after it returns.
type logGate struct {
	mu     sync.RWMutex
	closed bool
}

func (g *logGate) do(f func()) {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if !g.closed {
		f()
	}
}

func (g *logGate) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

func (h logrusHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h logrusHandler) WithGroup(string) slog.Handler      { return h }
