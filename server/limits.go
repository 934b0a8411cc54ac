package server

import (
	"errors"
	"net"
	"sync"

	"golang.org/x/net/netutil"
)

// ErrSessionBytes ends a connection that sent more than its share.
var ErrSessionBytes = errors.New("connection sent more bytes than a registration session may")

// LimitListener wraps ln so that at most maxConns connections are open at
// once (further ones wait in the kernel's backlog until one closes, so the
// server never runs out of file descriptors) and each connection can send
// at most maxBytes (one websocket registration per connection, so this is
// the bytes-per-session cap; it holds before anything is decoded). Zero
// means no limit of that kind.
func LimitListener(ln net.Listener, maxConns int, maxBytes int64) net.Listener {
	if maxConns > 0 {
		ln = netutil.LimitListener(ln, maxConns)
	}
	if maxBytes > 0 {
		ln = &byteCapListener{Listener: ln, max: maxBytes}
	}
	return ln
}

type byteCapListener struct {
	net.Listener
	max int64
}

func (l *byteCapListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &byteCapConn{Conn: c, left: l.max}, nil
}

type byteCapConn struct {
	net.Conn
	mu   sync.Mutex
	left int64
}

func (c *byteCapConn) Read(p []byte) (int, error) {
	c.mu.Lock()
	left := c.left
	c.mu.Unlock()
	if left <= 0 {
		return 0, ErrSessionBytes
	}
	if int64(len(p)) > left {
		p = p[:left]
	}
	n, err := c.Conn.Read(p)
	c.mu.Lock()
	c.left -= int64(n)
	c.mu.Unlock()
	return n, err
}
