package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
)

// DefaultNetworkWait bounds how long MsgGet from a client that cannot ask
// explicitly waits for pending addresses: as elemental-operator, up to the
// session deadline (which cuts it short), then the session fails so the
// client retries; a config without its network section would look final
// to elemental-register (PROTOCOL.md 7.5). nodereg agents announce that they
// ask again with MsgNetworkConfig and are not held at all, so registration
// and the wait for addresses stay separate (DESIGN.md).
const DefaultNetworkWait = protocol.DefaultSessionDeadline

// networkPoll is how often a waiting MsgGet re-checks claims another
// request may have freed; a claim's own delay is waited for exactly.
const networkPoll = 250 * time.Millisecond

// DefaultMaxSessions bounds the registration sessions in flight, server
// wide: each holds what its client sent, decoded.
const DefaultMaxSessions = 128

// defaultSessionSlotWait is how long a registration waits for a free session
// before it is answered 503: registrations take milliseconds, so a short
// wait absorbs a herd without failing it.
const defaultSessionSlotWait = 5 * time.Second

// DefaultMaxHardware is the hardware data kept per inventory: a large
// server's SMBIOS and system data are tens of KiB; the issue saw 4 MiB
// SMBIOS documents sent to fill the server.
const DefaultMaxHardware = 256 << 10

// Options configure a Server. Config and Store are required.
type Options struct {
	Config *regconfig.Config
	Store  *store.Store
	// Auth kinds, tried in order; nil means PLAIN only. Put TPM before
	// PLAIN, as upstream does.
	Auth []protocol.ServerAuthenticator
	// AllocationDelay holds back every new claim's address this long, so
	// clients must wait for it.
	AllocationDelay time.Duration
	// NetworkWait bounds the wait for pending addresses inside MsgGet
	// (clients at version >= 12 that did not announce the explicit ask);
	// 0 means DefaultNetworkWait, negative means fail at once.
	NetworkWait time.Duration
	// MaxHardware bounds the hardware data (SMBIOS and system data, as
	// stored) of one inventory; 0 means DefaultMaxHardware, negative means
	// no bound.
	MaxHardware int
	// MaxSessions bounds concurrent registration sessions; 0 means
	// DefaultMaxSessions.
	MaxSessions int
	// SessionSlotWait is how long a registration waits for a session slot
	// before HTTP 503; 0 means 5 s.
	SessionSlotWait time.Duration
	// SessionDeadline and MaxFrame go to protocol.Accept (0: defaults).
	SessionDeadline time.Duration
	MaxFrame        int64
	// ExternalURL is the base (scheme://host[:port]) written into
	// registration.url; empty means taken from each request.
	ExternalURL string
	// CACert is the PEM sent as registration.ca-cert when the
	// registration's config has none.
	CACert string
	Now    func() time.Time
	Random io.Reader
	Log    *logrus.Entry
}

// Server is an http.Handler serving registrations and the admin view.
type Server struct {
	cfg     *regconfig.Config
	store   *store.Store
	auth    []protocol.ServerAuthenticator
	delay   time.Duration
	wait    time.Duration
	session time.Duration
	frame   int64
	maxHW   int
	extURL  string
	caCert  string
	now     func() time.Time
	rnd     io.Reader
	log     *logrus.Entry

	// sessions holds a token per registration session in flight.
	sessions chan struct{}
	slotWait time.Duration

	// active counts websocket sessions: http.Server.Shutdown does not
	// wait for hijacked connections.
	active sync.WaitGroup
}

// New checks o and builds a Server.
func New(o Options) (*Server, error) {
	if o.Config == nil {
		return nil, errors.New("server: no config")
	}
	if o.Store == nil {
		return nil, errors.New("server: no store")
	}
	s := &Server{
		cfg: o.Config, store: o.Store, auth: o.Auth, delay: o.AllocationDelay,
		wait: o.NetworkWait, session: o.SessionDeadline, frame: o.MaxFrame, maxHW: o.MaxHardware,
		extURL: strings.TrimRight(o.ExternalURL, "/"), caCert: o.CACert,
		now: o.Now, rnd: o.Random, log: o.Log,
	}
	if s.auth == nil {
		s.auth = []protocol.ServerAuthenticator{protocol.PlainServer{}}
	}
	if s.wait == 0 {
		s.wait = DefaultNetworkWait
	}
	if s.maxHW == 0 {
		s.maxHW = DefaultMaxHardware
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	s.sessions = make(chan struct{}, o.MaxSessions)
	s.slotWait = o.SessionSlotWait
	if s.slotWait <= 0 {
		s.slotWait = defaultSessionSlotWait
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.rnd == nil {
		s.rnd = rand.Reader
	}
	s.log = logx.OrDiscard(s.log)
	for i := range o.Config.Registrations {
		if reg := &o.Config.Registrations[i]; len(s.authFor(reg)) == 0 {
			s.log.Warnf("registration %s: no authenticator for its auth %q (is the server started with --no-tpm?): every machine will be refused", reg.Name, reg.Config.Elemental.Registration.Auth)
		}
	}
	// Claims of pools removed from the config, or delays already served,
	// are settled before the first request.
	if err := s.store.Update(func(st *store.State) (bool, error) {
		return s.reconcile(st, s.now()), nil
	}); err != nil {
		return nil, fmt.Errorf("server: initial reconcile: %w", err)
	}
	return s, nil
}

// ServeHTTP routes /elemental/registration/<token> (PROTOCOL.md 2.2). The
// admin API is not served here: see Admin.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(r.URL.Path, "/")
	if len(parts) < 3 {
		http.Error(w, "", http.StatusNotFound)
		return
	}
	switch parts[2] {
	case "registration":
	case "seedimage":
		http.Error(w, "seed images are not served by regserver", http.StatusNotImplemented)
		return
	default:
		http.Error(w, "unknown api: "+parts[2], http.StatusBadRequest)
		return
	}
	token := parts[len(parts)-1]
	reg, ok := s.cfg.ByToken(token)
	if !ok || len(parts) < 4 {
		// Upstream echoes the token here (PROTOCOL.md 2.2); a client that
		// logs the body would print it, so regserver names no token.
		http.Error(w, "failed to find machine registration with this registration token", http.StatusNotFound)
		return
	}
	url := s.registrationURL(r)
	if !protocol.IsWebSocketUpgrade(r) {
		s.servePlain(w, reg, url)
		return
	}
	if !s.acquireSession(r) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many registration sessions in flight; try again", http.StatusServiceUnavailable)
		return
	}
	defer func() { <-s.sessions }()
	auth := s.authFor(reg)
	h := &session{srv: s, reg: reg, url: url,
		explicit: r.Header.Get(protocol.HeaderNetworkConfig) == protocol.NetworkConfigExplicit}
	s.active.Add(1)
	defer s.active.Done()
	err := protocol.Accept(w, r, protocol.ServerOptions{
		Auth: auth, MaxFrame: s.frame, Deadline: s.session,
		Log: s.log.WithField("registration", reg.Name),
	}, h)
	if err != nil {
		s.log.WithFields(logrus.Fields{"registration": reg.Name, "remote": r.RemoteAddr}).Warnf("registration session: %v", err)
	}
}

// acquireSession waits a little for a free session slot.
func (s *Server) acquireSession(r *http.Request) bool {
	select {
	case s.sessions <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(s.slotWait)
	defer t.Stop()
	select {
	case s.sessions <- struct{}{}:
		return true
	case <-t.C:
		s.log.WithField("remote", r.RemoteAddr).Warn("registration refused: too many sessions in flight")
		return false
	case <-r.Context().Done():
		return false
	}
}

// authFor is the authentication a registration accepts, decided by its
// auth: tpm (the default) takes TPM only, mac and sys-uuid take PLAIN only.
// Stricter than elemental-operator, which takes any kind for any
// registration: there anybody who knows the URL and a MAC address could
// register as a machine meant to prove itself with its TPM.
func (s *Server) authFor(reg *regconfig.Registration) []protocol.ServerAuthenticator {
	prefix := protocol.PrefixTPM
	switch reg.Config.Elemental.Registration.Auth {
	case "mac", "sys-uuid":
		prefix = protocol.PrefixPlain
	}
	var out []protocol.ServerAuthenticator
	for _, a := range s.auth {
		if a.Accepts(prefix) {
			out = append(out, a)
		}
	}
	return out
}

// Wait returns when every registration session in flight has ended, or
// with ctx's error. Call it after http.Server.Shutdown for a graceful stop.
func (s *Server) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.active.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for registration sessions: %w", ctx.Err())
	}
}

// registrationURL is what the client should dial next time; the token is
// part of it but it is never logged.
func (s *Server) registrationURL(r *http.Request) string {
	if s.extURL != "" {
		return s.extURL + r.URL.Path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + r.URL.Path
}

// registrationBlock is the config's registration part as the server
// rebuilds it (PROTOCOL.md 7.1).
func (s *Server) registrationBlock(reg *regconfig.Registration, url string) protocol.Registration {
	rb := reg.Config.Elemental.Registration
	rb.URL = url
	if rb.CACert == "" {
		rb.CACert = s.caCert
	}
	if rb.Auth == "" {
		rb.Auth = "tpm"
	}
	// Local-only keys are never sent by the server.
	rb.NoToolkit, rb.Labels = false, nil
	return rb
}

// servePlain answers a non-websocket request with the registration YAML,
// without authentication, as upstream does (PROTOCOL.md 2.3).
func (s *Server) servePlain(w http.ResponseWriter, reg *regconfig.Registration, url string) {
	doc := struct {
		Elemental struct {
			Registration protocol.Registration `yaml:"registration"`
		} `yaml:"elemental"`
	}{}
	doc.Elemental.Registration = s.registrationBlock(reg, url)
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(4)
	if err := enc.Encode(&doc); err != nil {
		http.Error(w, "encoding registration: "+err.Error(), http.StatusInternalServerError)
		return
	}
	_ = enc.Close()
	_, _ = w.Write(buf.Bytes())
}

// session is the SessionHandler of one registration connection.
type session struct {
	srv *Server
	reg *regconfig.Registration
	url string
	// explicit: the client announced it asks with MsgNetworkConfig
	// (protocol.HeaderNetworkConfig), so MsgGet need not wait for it.
	explicit bool
}

var errNotFound = &protocol.ErrorReply{Message: "MachineInventory not found", Reason: protocol.ReasonInventoryNotFound}

func (h *session) Update(_ context.Context, s *protocol.ServerSession) error {
	found := false
	h.srv.store.View(func(st *store.State) { found = st.Inventories[s.Identity.Hash] != nil })
	if !found {
		h.srv.log.WithField("machine", s.Identity.Hash).Warn("update for unknown inventory: the machine needs a fresh registration (--reset)")
		return errNotFound
	}
	return nil
}

func (h *session) Get(ctx context.Context, s *protocol.ServerSession) (*protocol.ConfigReply, error) {
	srv := h.srv
	var (
		name    string
		nc      *protocol.NetworkConfig
		pending *protocol.ErrorReply
		readyAt time.Time
	)
	err := srv.store.Update(func(st *store.State) (bool, error) {
		now := srv.now()
		inv, err := srv.registerInventory(st, h.reg, s, now)
		if err != nil {
			return false, err
		}
		srv.reconcile(st, now)
		name = inv.Name
		nc, pending, readyAt = srv.netStatus(st, inv, now)
		return true, nil
	})
	if err != nil {
		var er *protocol.ErrorReply
		if errors.As(err, &er) {
			return nil, er
		}
		return nil, fmt.Errorf("MachineInventory update failed: %w", err)
	}
	if pending != nil && s.Version >= protocol.Version && !h.explicit {
		if pending.Reason != protocol.ReasonAllocationFailed {
			nc, pending = h.waitNetwork(ctx, s.Identity.Hash, pending, readyAt)
		}
		if pending != nil {
			// Never a config without its network section: upstream
			// clients would take it as final. The session fails, the
			// client retries, as with elemental-operator.
			srv.log.WithFields(logrus.Fields{"machine": s.Identity.Hash, "inventory": name, "pending": pending.Error()}).Info("network config not ready; session ends with an error")
			return nil, &protocol.ErrorReply{Reason: pending.Reason, RetryAfterSeconds: pending.RetryAfterSeconds,
				Message: "NetworkConfig not ready: " + pending.Message}
		}
	}

	cfg := h.reg.Config
	cfg.Elemental.Registration = srv.registrationBlock(h.reg, h.url)
	if cfg.Elemental.SystemAgent.URL != "" {
		cfg.Elemental.SystemAgent.SecretName = name
	}
	reply := &protocol.ConfigReply{Config: cfg, ExplicitNetworkConfig: h.explicit}
	fields := logrus.Fields{"machine": s.Identity.Hash, "inventory": name, "registration": h.reg.Name, "version": s.Version, "update": s.Updated}
	switch {
	case pending != nil:
		fields["pending"] = pending.Error()
	case nc.IsReal():
		reply.Network = nc
		fields["addresses"] = formatIPs(nc.IPAddresses)
	default:
		fields["addresses"] = "none"
	}
	srv.log.WithFields(fields).Info("registered")
	return reply, nil
}

// waitNetwork re-checks the inventory's claims until every one holds an
// address, a terminal reason shows up, or the bounded wait ends, whichever
// comes first. It keeps the reply inside the session deadline.
func (h *session) waitNetwork(ctx context.Context, hash string, pending *protocol.ErrorReply, readyAt time.Time) (*protocol.NetworkConfig, *protocol.ErrorReply) {
	srv := h.srv
	end := time.Now().Add(srv.wait)
	if srv.wait < 0 {
		end = time.Now()
	}
	if d, ok := ctx.Deadline(); ok && d.Before(end) {
		end = d
	}
	var nc *protocol.NetworkConfig
	for pending != nil && pending.Reason != protocol.ReasonAllocationFailed && pending.Reason != protocol.ReasonInventoryNotFound {
		// A delayed claim is due at readyAt; a full pool may be freed by
		// an admin at any time, so it is polled.
		step := networkPoll
		if pending.Reason == protocol.ReasonWaitingForIPAddress {
			step = min(max(readyAt.Sub(srv.now()), 0), networkPoll)
		}
		left := time.Until(end)
		if left <= 0 {
			return nil, pending
		}
		t := time.NewTimer(min(step, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, pending
		case <-t.C:
		}
		err := srv.store.Update(func(st *store.State) (bool, error) {
			now := srv.now()
			changed := srv.reconcile(st, now)
			inv := st.Inventories[hash]
			if inv == nil {
				// Deleted by an admin while we waited.
				pending = errNotFound
				return changed, nil
			}
			nc, pending, readyAt = srv.netStatus(st, inv, now)
			return changed, nil
		})
		if err != nil {
			return nil, &protocol.ErrorReply{Reason: protocol.ReasonAllocationFailed, Message: err.Error()}
		}
	}
	return nc, pending
}

func (h *session) NetworkConfig(_ context.Context, s *protocol.ServerSession) (*protocol.NetworkConfig, error) {
	srv := h.srv
	var (
		nc      *protocol.NetworkConfig
		pending *protocol.ErrorReply
	)
	err := srv.store.Update(func(st *store.State) (bool, error) {
		now := srv.now()
		changed := srv.reconcile(st, now)
		inv := st.Inventories[s.Identity.Hash]
		if inv == nil {
			pending = errNotFound
			return changed, nil
		}
		nc, pending, _ = srv.netStatus(st, inv, now)
		return changed, nil
	})
	if err != nil {
		return nil, &protocol.ErrorReply{Reason: protocol.ReasonAllocationFailed, Message: err.Error()}
	}
	if pending != nil {
		srv.log.WithFields(logrus.Fields{"machine": s.Identity.Hash, "pending": pending.Error()}).Info("network config not ready")
		return nil, pending
	}
	srv.log.WithFields(logrus.Fields{"machine": s.Identity.Hash, "addresses": formatIPs(nc.IPAddresses)}).Info("network config sent")
	return nc, nil
}

func formatIPs(m map[string]string) string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
