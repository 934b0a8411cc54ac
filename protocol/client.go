package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gorilla/websocket"

	"github.com/nodereg/nodereg/internal/errclass"
)

// Step names used in errors, so an operator sees where a conversation broke.
const (
	StepDial          = "dial"
	StepAuth          = "auth"
	StepVersion       = "version"
	StepUpdate        = "update"
	StepSmbios        = "smbios"
	StepSystemData    = "system-data"
	StepAnnotations   = "annotations"
	StepLabels        = "labels"
	StepGet           = "get"
	StepConfig        = "config"
	StepNetworkConfig = "network-config"
)

// StepError is a failure at one step of the conversation.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }
func (e *StepError) Unwrap() error { return e.Err }

func stepErr(step string, err error) error {
	if err == nil {
		return nil
	}
	return &StepError{Step: step, Err: err}
}

// HeaderNetworkConfig on the websocket upgrade tells a nodereg server that
// this client can ask for the network config with MsgNetworkConfig, so it
// may reply before addresses are ready; upstream servers ignore it.
const (
	HeaderNetworkConfig   = "X-Nodereg-Network-Config"
	NetworkConfigExplicit = "explicit"
)

// DefaultSessionDeadline is upstream's RegistrationDeadlineSeconds: both
// sides give a connection 10 s in all (docs/protocol.md §1.4).
const DefaultSessionDeadline = 10 * time.Second

// DialOptions configure one connection to the registration server.
type DialOptions struct {
	URL string
	// CACert is the PEM text of the CA to trust: a ca-cert that names a
	// file (docs/protocol.md §1.3) is read by the caller, through its host
	// edge (CAPEM).
	CACert string
	// NoSystemPool refuses to fall back on the system pool when CACert is
	// empty. A pinned CA is always trusted alone (TLSConfig).
	NoSystemPool bool
	// HandshakeTimeout bounds the HTTP upgrade; default 45 s as upstream.
	HandshakeTimeout time.Duration
	// SessionDeadline bounds the whole conversation after the upgrade.
	SessionDeadline time.Duration
	MaxFrame        int64
	// Resolver looks up the server's host name; nil is the system's. Tests
	// answer from a resolver of their own, never the machine's.
	Resolver *net.Resolver
	// LocalAddr is the client's end of the connection; nil lets the
	// kernel choose. The reboot-storm benchmark gives each simulated
	// machine a loopback address of its own with it.
	LocalAddr net.Addr
}

// WebSocketURL converts a registration URL as upstream does: the first
// "http" becomes "ws". Unlike upstream we require an http(s) scheme, since
// the substring replace mangles other URLs (docs/protocol.md §9).
func WebSocketURL(u string) (string, error) {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return "", fmt.Errorf("registration URL %q: scheme must be http or https", RedactURL(u))
	}
	return "ws" + strings.TrimPrefix(u, "http"), nil
}

// ClientConn is an authenticated, version-negotiated connection.
type ClientConn struct {
	c *Conn
	// token is the registration token, removed from every error.
	token string
	// Version is the negotiated protocol version.
	Version byte
}

// Dial connects, authenticates with auth and negotiates the version. No
// error it returns carries the registration token, whatever the server
// echoes.
func Dial(ctx context.Context, o DialOptions, auth Authenticator) (*ClientConn, error) {
	token := RegistrationToken(o.URL)
	cc, err := dial(ctx, o, auth)
	if err != nil {
		return nil, redactError(err, token)
	}
	cc.token = token
	return cc, nil
}

func dial(ctx context.Context, o DialOptions, auth Authenticator) (*ClientConn, error) {
	wsURL, err := WebSocketURL(o.URL)
	if err != nil {
		return nil, stepErr(StepDial, err)
	}
	token, err := auth.Token(ctx)
	if err != nil {
		return nil, stepErr(StepAuth, err)
	}
	d := websocket.Dialer{
		Proxy:            http.ProxyFromEnvironment,
		HandshakeTimeout: o.HandshakeTimeout,
	}
	if d.HandshakeTimeout == 0 {
		d.HandshakeTimeout = 45 * time.Second
	}
	if o.Resolver != nil || o.LocalAddr != nil {
		d.NetDialContext = (&net.Dialer{Resolver: o.Resolver, LocalAddr: o.LocalAddr}).DialContext
	}
	if strings.HasPrefix(wsURL, "wss://") {
		if d.TLSClientConfig, err = TLSConfig(o.CACert, o.NoSystemPool); err != nil {
			return nil, stepErr(StepDial, err)
		}
	}
	hdr := http.Header{}
	hdr.Set("Authorization", token)
	hdr.Set(HeaderNetworkConfig, NetworkConfigExplicit)
	ws, resp, err := d.DialContext(ctx, wsURL, hdr)
	if err != nil {
		return nil, stepErr(StepDial, dialError(err, resp))
	}
	deadline := time.Now().Add(orDefault(o.SessionDeadline, DefaultSessionDeadline))
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = ws.SetReadDeadline(deadline)
	_ = ws.SetWriteDeadline(deadline)
	cc := &ClientConn{c: NewConn(ws, o.MaxFrame)}
	// A cancelled context must unblock reads too.
	stop := context.AfterFunc(ctx, func() { ws.Close() })
	defer stop()
	if err := cc.authenticate(ctx, auth); err != nil {
		ws.Close()
		return nil, stepErr(StepAuth, err)
	}
	if err := cc.negotiate(); err != nil {
		ws.Close()
		return nil, stepErr(StepVersion, err)
	}
	return cc, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func dialError(err error, resp *http.Response) error {
	if resp == nil {
		return CertificateRejected(hostNotFound(err))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	resp.Body.Close()
	return &HandshakeError{StatusCode: resp.StatusCode, Status: resp.Status, Body: strings.TrimSpace(string(body)), Err: err}
}

// ErrHostNotFound marks a registration host that DNS says does not exist
// (NXDOMAIN): a typo in the URL, not a network still coming up, so the
// agent does not spend its whole deadline retrying it (agent/exitcode).
var ErrHostNotFound = errclass.New(errclass.Final, "registration host not found in DNS", "DNS: no such host")

// hostNotFound names DNS in a dial error whose lookup found no such host;
// a lookup that timed out or could not reach a server is left as it is.
func hostNotFound(err error) error {
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		return err
	}
	return fmt.Errorf("%w: the registration host %q does not resolve (check the registration URL and the node's DNS): %w", ErrHostNotFound, de.Name, err)
}

// HandshakeError is a websocket upgrade the server answered with an HTTP
// status instead of 101; the status tells a wrong registration URL (404)
// from a server in trouble (5xx).
type HandshakeError struct {
	StatusCode int
	Status     string
	Body       string
	Err        error
}

func (e *HandshakeError) Error() string {
	if e.Body != "" {
		return fmt.Sprintf("%v (Status: %s): %s", e.Err, e.Status, e.Body)
	}
	return fmt.Sprintf("%v (Status: %s)", e.Err, e.Status)
}

func (e *HandshakeError) Unwrap() error { return e.Err }

// HTTPStatus is the status the upgrade was answered with.
func (e *HandshakeError) HTTPStatus() int { return e.StatusCode }

func (cc *ClientConn) authenticate(ctx context.Context, auth Authenticator) error {
	if auth.HasChallenge() {
		challenge, err := cc.c.ReadRaw()
		if err != nil {
			return fmt.Errorf("reading challenge: %w", closedBeforeAnything(closedDuringAuth(err), auth))
		}
		resp, err := auth.Answer(ctx, challenge)
		if err != nil {
			return err
		}
		if err := cc.c.WriteRaw(resp); err != nil {
			return fmt.Errorf("sending challenge response: %w", err)
		}
	}
	if _, err := cc.c.Expect(MsgReady); err != nil {
		if !auth.HasChallenge() {
			return closedBeforeAnything(closedDuringAuth(err), auth)
		}
		return closedDuringAuth(err)
	}
	return nil
}

// closedBeforeAnything names the likeliest cause of a silent close before
// the server sent a single frame: it does not take this auth kind for the
// registration (regserver and upstream close on a scheme they do not
// expect), which no retry fixes; a PLAIN identifier it refuses looks the
// same on the wire.
func closedBeforeAnything(err error, auth Authenticator) error {
	if !errors.Is(err, ErrAuth) {
		return err
	}
	return fmt.Errorf("auth kind mismatch? the server closed the connection before any challenge: check that the registration's elemental.registration.auth is %s, as this node sends: %w", auth.Kind(), err)
}

// closedDuringAuth explains the silent close upstream servers use to
// reject a client (docs/protocol.md §1.5).
func closedDuringAuth(err error) error {
	if closedByPeer(err) {
		return fmt.Errorf("%w: the server closed the connection (rejected credentials?): %v", ErrAuth, err)
	}
	return err
}

// closedByPeer: err is the connection ending, not a frame or a reply.
func closedByPeer(err error) bool {
	var ce *websocket.CloseError
	return errors.As(err, &ce) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isNetClosed(err)
}

func isNetClosed(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe)
}

func (cc *ClientConn) negotiate() error {
	if err := cc.c.Write(MsgVersion, []byte{Version}); err != nil {
		return err
	}
	p, err := cc.c.Expect(MsgVersion)
	if err != nil {
		return err
	}
	if len(p) != 1 {
		return fmt.Errorf("%w: version reply of %d bytes", ErrFrame, len(p))
	}
	cc.Version = p[0]
	return nil
}

// LocalAddr is the local end of the TCP connection.
func (cc *ClientConn) LocalAddr() net.Addr { return cc.c.ws.LocalAddr() }

// RegistrationIP is upstream's registration-ip annotation: the local address
// with the port cut at the last colon (IPv6 keeps its brackets).
func (cc *ClientConn) RegistrationIP() string { return registrationIP(cc.LocalAddr().String()) }

// registrationIP cuts the port at the last colon; "" when there is none
// (upstream then leaves the annotation out).
func registrationIP(addr string) string {
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		return ""
	}
	return addr[:i]
}

// Close closes the connection.
func (cc *ClientConn) Close() error { return cc.c.ws.Close() }

// Payloads is what the client sends in one registration.
type Payloads struct {
	// Update: the state says we are registered; send MsgUpdate first.
	Update           bool
	NoSMBIOS         bool
	SMBIOS           map[string]any
	SystemDataV2     map[string]any
	LegacySystemData json.RawMessage
	Annotations      map[string]string
	Labels           map[string]string
}

// ErrUpdateUnsupported: the server's protocol is too old for updates.
var ErrUpdateUnsupported = errclass.New(errclass.Config, "update refused by an old server", "elemental-operator protocol version does not support update")

// Register runs the registration on a negotiated connection, decoding the
// config reply on top of cfg (docs/protocol.md §3.2, §3.3, §2.5 gates).
func (cc *ClientConn) Register(ctx context.Context, reg *Payloads, cfg *Config) (*Reply, error) {
	r, err := cc.register(ctx, reg, cfg)
	if err != nil {
		return nil, redactError(err, cc.token)
	}
	return r, nil
}

func (cc *ClientConn) register(ctx context.Context, reg *Payloads, cfg *Config) (*Reply, error) {
	stop := context.AfterFunc(ctx, func() { cc.c.ws.Close() })
	defer stop()
	v := cc.Version
	if reg.Update {
		if v < versionUpdate {
			return nil, stepErr(StepUpdate, ErrUpdateUnsupported)
		}
		if err := cc.c.Write(MsgUpdate, nil); err != nil {
			return nil, stepErr(StepUpdate, err)
		}
		if _, err := cc.c.Expect(MsgReady); err != nil {
			return nil, stepErr(StepUpdate, err)
		}
	}
	if !reg.NoSMBIOS {
		if err := cc.sendJSON(StepSmbios, MsgSmbios, reg.SMBIOS); err != nil {
			return nil, err
		}
		switch {
		case v >= versionSystemDataV2:
			if err := cc.sendJSON(StepSystemData, MsgSystemDataV2, reg.SystemDataV2); err != nil {
				return nil, err
			}
		case v >= versionSystemDataLegacy && len(reg.LegacySystemData) > 0:
			if err := cc.sendRaw(StepSystemData, MsgSystemData, append(append([]byte{}, reg.LegacySystemData...), '\n')); err != nil {
				return nil, err
			}
		}
	}
	if v >= versionAnnotations {
		if err := cc.sendJSON(StepAnnotations, MsgAnnotations, reg.Annotations); err != nil {
			return nil, err
		}
	}
	if len(reg.Labels) > 0 {
		if err := cc.sendJSON(StepLabels, MsgLabels, reg.Labels); err != nil {
			return nil, err
		}
	}
	if err := cc.c.Write(MsgGet, nil); err != nil {
		return nil, stepErr(StepGet, err)
	}
	var payload []byte
	var err error
	if v >= versionTypedConfig {
		payload, err = cc.c.Expect(MsgConfig)
	} else {
		payload, err = cc.c.ReadRaw()
	}
	if err != nil {
		return nil, stepErr(StepConfig, err)
	}
	r, err := DecodeConfigReply(payload, cfg)
	return r, stepErr(StepConfig, err)
}

// EncodeJSON is upstream's payload encoding: encoding/json's stream encoder,
// sorted keys, HTML escaping, one trailing newline (docs/protocol.md §2.3).
func EncodeJSON(v any) ([]byte, error) {
	var b strings.Builder
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

func (cc *ClientConn) sendJSON(step string, t MsgType, v any) error {
	p, err := EncodeJSON(v)
	if err != nil {
		return stepErr(step, err)
	}
	return cc.sendRaw(step, t, p)
}

func (cc *ClientConn) sendRaw(step string, t MsgType, p []byte) error {
	if err := cc.c.Write(t, p); err != nil {
		return stepErr(step, err)
	}
	_, err := cc.c.Expect(MsgReady)
	return stepErr(step, err)
}
