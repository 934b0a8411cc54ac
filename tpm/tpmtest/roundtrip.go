package tpmtest

import (
	"context"

	"github.com/nodereg/nodereg/protocol"
)

// Exchange records one authentication over Pipe.
type Exchange struct {
	Token     string
	Challenge []byte
	Response  []byte
	Identity  protocol.Identity
	ClientErr error // Token or Answer failed
	ServerErr error // the server rejected
}

// RoundTrip runs a whole authentication between a client and a server
// authenticator over an in-memory RawConn pair, as the websocket would.
func RoundTrip(ctx context.Context, c protocol.Authenticator, s protocol.ServerAuthenticator) Exchange {
	var x Exchange
	x.Token, x.ClientErr = c.Token(ctx)
	if x.ClientErr != nil {
		return x
	}
	cli, srv := Pipe()
	type result struct {
		id  protocol.Identity
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := s.Authenticate(ctx, x.Token, srv)
		srv.Close()
		done <- result{id, err}
	}()
	ch, err := cli.ReadRaw()
	if err == nil {
		x.Challenge = ch
		x.Response, x.ClientErr = c.Answer(ctx, ch)
		if x.ClientErr == nil {
			_ = cli.WriteRaw(x.Response)
		}
	}
	cli.Close()
	r := <-done
	x.Identity, x.ServerErr = r.id, r.err
	return x
}
