package protocol

import (
	"context"
	"errors"
	"fmt"
)

// ErrNetworkConfigDropped: the server closed the connection on
// MsgNetworkConfig without a word, as released elemental-operators do
// (docs/protocol.md §7.3).
var ErrNetworkConfigDropped = errors.New("the server closed the connection on MsgNetworkConfig (0x0C) without an answer")

// ExplicitNetworkConfig asks for the network config with MsgNetworkConfig on
// this (fresh) connection. Only for servers that announced it or that the
// admin configured as explicit: released operators drop the connection on
// 0x0C (docs/protocol.md §7.3). The answer is the config, or *ErrorReply with a
// reason such as WaitingForIPAddress.
func (cc *ClientConn) ExplicitNetworkConfig(ctx context.Context) (*NetworkConfig, error) {
	nc, err := cc.explicitNetworkConfig(ctx)
	if err != nil {
		return nil, redactError(err, cc.token)
	}
	return nc, nil
}

func (cc *ClientConn) explicitNetworkConfig(ctx context.Context) (*NetworkConfig, error) {
	stop := context.AfterFunc(ctx, func() { cc.c.ws.Close() })
	defer stop()
	if cc.Version < versionNetworkConfig {
		return nil, stepErr(StepNetworkConfig, fmt.Errorf("server negotiated protocol version %d, explicit network config needs %d", cc.Version, versionNetworkConfig))
	}
	if err := cc.c.Write(MsgNetworkConfig, nil); err != nil {
		return nil, stepErr(StepNetworkConfig, err)
	}
	p, err := cc.c.Expect(MsgNetworkConfig)
	if err != nil && ctx.Err() == nil && closedByPeer(err) {
		err = fmt.Errorf("%w: %v", ErrNetworkConfigDropped, err)
	}
	if err != nil {
		return nil, stepErr(StepNetworkConfig, err)
	}
	nc, err := DecodeNetworkConfigJSON(p)
	return nc, stepErr(StepNetworkConfig, err)
}
