package labkit

// The clients a lab runs from inside a network namespace it made: a
// dialer, and regserver's admin API reached through it.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
)

// DialIn opens a connection from inside the named network namespace: the
// socket is created on a thread RunInNS switched into it, and keeps it.
func DialIn(ctx context.Context, ns, network, addr string) (net.Conn, error) {
	var conn net.Conn
	var dialErr error
	if err := RunInNS(ns, func() {
		var d net.Dialer
		conn, dialErr = d.DialContext(ctx, network, addr)
	}); err != nil {
		return nil, err
	}
	return conn, dialErr
}

// Admin is regserver's admin API at Addr (host:port), called from inside
// namespace NS ("" for the test's own) with the bearer Token ("" sends
// none). A started Regserver carries its own.
type Admin struct {
	NS, Addr, Token string
}

// adminReplyMax bounds what Do reads of a reply: far above a lab's store
// export, so only a server gone wrong meets it.
const adminReplyMax = 64 << 20

// Do sends one request without a body and returns the response body; a
// status other than 200 is an error carrying the body too.
func (a Admin) Do(method, path string) ([]byte, error) {
	// readyWithin, not a guess at speed: it bounds a server that hangs,
	// and a store export on a loaded machine may take seconds.
	client := &http.Client{Timeout: readyWithin, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			if a.NS == "" {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			return DialIn(ctx, a.NS, network, addr)
		},
		DisableKeepAlives: true,
	}}
	req, err := http.NewRequest(method, "http://"+a.Addr+path, nil)
	if err != nil {
		return nil, err
	}
	if a.Token != "" {
		req.Header.Set("Authorization", "Bearer "+a.Token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(io.LimitReader(resp.Body, adminReplyMax+1)); err != nil {
		return nil, err
	}
	if b.Len() > adminReplyMax {
		return nil, fmt.Errorf("%s %s: %s: a reply over %d bytes", method, path, resp.Status, adminReplyMax)
	}
	if resp.StatusCode != http.StatusOK {
		return b.Bytes(), fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b.Bytes())
	}
	return b.Bytes(), nil
}
