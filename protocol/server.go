package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"
	"github.com/sirupsen/logrus"
)

// ServerOptions configure the server side of a connection.
type ServerOptions struct {
	// Auth kinds, tried in order by Accepts(header).
	Auth     []ServerAuthenticator
	MaxFrame int64
	// Deadline bounds the whole session after the upgrade (default 10 s,
	// as upstream; docs/protocol.md §1.4).
	Deadline time.Duration
	// Log is accepted for the callers' sake; the conversation reports
	// through its returned error, which the caller logs.
	Log *logrus.Entry
}

// IsWebSocketUpgrade reports whether r asks for a websocket, with the same
// header test as upstream (docs/protocol.md §1.3).
func IsWebSocketUpgrade(r *http.Request) bool {
	return headerHas(r.Header, "Connection", "upgrade") && headerHas(r.Header, "Upgrade", "websocket")
}

func headerHas(h http.Header, key, token string) bool {
	for _, v := range h.Values(key) {
		for _, f := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(f), token) {
				return true
			}
		}
	}
	return false
}

// replyMargin is kept out of the handler's context so a reply (config or
// error) can still be written before the session deadline.
const replyMargin = 500 * time.Millisecond

// Accept upgrades r and runs one registration conversation, calling h. It
// returns when the config reply (or the network config) was sent, or on the
// first error; the connection is closed either way.
func Accept(w http.ResponseWriter, r *http.Request, o ServerOptions, h SessionHandler) error {
	header := r.Header.Get("Authorization")
	var auth ServerAuthenticator
	for _, a := range o.Auth {
		if a.Accepts(header) {
			auth = a
			break
		}
	}
	up := websocket.Upgrader{
		HandshakeTimeout: 5 * time.Second,
		CheckOrigin:      func(*http.Request) bool { return true },
	}
	ws, err := up.Upgrade(w, r, nil)
	if err != nil {
		return stepErr(StepDial, err)
	}
	defer ws.Close()
	deadline := time.Now().Add(orDefault(o.Deadline, DefaultSessionDeadline))
	_ = ws.SetReadDeadline(deadline)
	_ = ws.SetWriteDeadline(deadline)
	ctx, cancel := context.WithDeadline(r.Context(), deadline.Add(-replyMargin))
	defer cancel()
	c := NewConn(ws, o.MaxFrame)

	// Like upstream, an authentication failure closes the connection
	// without a message (docs/protocol.md §1.5): upstream clients expect that.
	if auth == nil {
		return stepErr(StepAuth, fmt.Errorf("%w: unsupported Authorization scheme", ErrAuth))
	}
	id, err := auth.Authenticate(ctx, header, c)
	if err != nil {
		return stepErr(StepAuth, err)
	}
	if err := c.Write(MsgReady, nil); err != nil {
		return stepErr(StepAuth, err)
	}
	s := &ServerSession{Identity: id, RemoteAddr: r.RemoteAddr}
	return serveLoop(ctx, c, s, h)
}

func serveLoop(ctx context.Context, c *Conn, s *ServerSession, h SessionHandler) error {
	for {
		t, p, err := c.Read()
		if err != nil {
			return err
		}
		switch t {
		case MsgVersion:
			v, err := negotiateServer(p)
			if err != nil {
				return stepErr(StepVersion, err)
			}
			s.Version = v
			if err := c.Write(MsgVersion, []byte{v}); err != nil {
				return stepErr(StepVersion, err)
			}
		case MsgSmbios:
			if err := decodeAck(c, StepSmbios, p, &s.SMBIOS); err != nil {
				return err
			}
		case MsgSystemDataV2:
			if err := decodeAck(c, StepSystemData, p, &s.SystemData); err != nil {
				return err
			}
		case MsgSystemData:
			var v map[string]any
			if err := decodeAck(c, StepSystemData, p, &v); err != nil {
				return err
			}
			s.LegacySystemData = json.RawMessage(strings.TrimSpace(string(p)))
		case MsgAnnotations:
			if err := decodeAck(c, StepAnnotations, p, &s.Annotations); err != nil {
				return err
			}
		case MsgLabels:
			if err := decodeAck(c, StepLabels, p, &s.Labels); err != nil {
				return err
			}
		case MsgUpdate:
			s.Updated = true
			if err := h.Update(ctx, s); err != nil {
				return stepErr(StepUpdate, sendError(c, s.Version, err))
			}
			if err := c.Write(MsgReady, nil); err != nil {
				return stepErr(StepUpdate, err)
			}
		case MsgGet:
			reply, err := h.Get(ctx, s)
			if err != nil {
				return stepErr(StepGet, sendError(c, s.Version, err))
			}
			b, err := EncodeConfigReply(reply, s.Version)
			if err != nil {
				return stepErr(StepConfig, sendError(c, s.Version, err))
			}
			if s.Version < versionTypedConfig {
				return stepErr(StepConfig, c.WriteRaw(b))
			}
			return stepErr(StepConfig, c.Write(MsgConfig, b))
		case MsgNetworkConfig:
			// nodereg's explicit exchange (docs/protocol.md §7.3); only after the
			// client negotiated 12, as commit 342bba26 required.
			if s.Version < versionNetworkConfig {
				return stepErr(StepNetworkConfig, fmt.Errorf("%w: got unexpected message: %s", ErrFrame, t))
			}
			nc, err := h.NetworkConfig(ctx, s)
			if err != nil {
				return stepErr(StepNetworkConfig, sendError(c, s.Version, err))
			}
			b, err := json.Marshal(nc)
			if err != nil {
				return stepErr(StepNetworkConfig, err)
			}
			return stepErr(StepNetworkConfig, c.Write(MsgNetworkConfig, b))
		default:
			return fmt.Errorf("%w: got unexpected message: %s", ErrFrame, t)
		}
	}
}

// negotiateServer is upstream's decodeProtocolVersion (docs/protocol.md §2.5).
func negotiateServer(p []byte) (byte, error) {
	if len(p) != 1 {
		return 0, fmt.Errorf("%w: unknown format of protocol version (%d bytes)", ErrFrame, len(p))
	}
	v := p[0]
	switch {
	case v == Version:
		return v, nil
	case v <= byte(MsgGet):
		return 0, fmt.Errorf("elemental-register protocol version is deprecated (client version %d)", v)
	case v > Version:
		return Version, nil
	default:
		return v, nil
	}
}

func decodeAck(c *Conn, step string, p []byte, into any) error {
	if err := json.Unmarshal(p, into); err != nil {
		return stepErr(step, fmt.Errorf("%w: %v", ErrFrame, err))
	}
	return stepErr(step, c.Write(MsgReady, nil))
}

// sendError reports err to the client when its version knows MsgError
// (>= 8) and returns err for the caller's log.
func sendError(c *Conn, v byte, err error) error {
	if v >= versionError {
		if wErr := c.Write(MsgError, EncodeError(err)); wErr != nil {
			return errors.Join(err, wErr)
		}
	}
	return err
}
