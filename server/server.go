package server

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
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
// to elemental-register (docs/protocol.md, the network config). nodereg agents announce that they
// ask again with MsgNetworkConfig and are not held at all, so registration
// and the wait for addresses stay separate (docs/regserver.md, Network config
// replies).
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
// server's SMBIOS and system data are tens of KiB; a hostile client could
// send 4 MiB SMBIOS documents to fill the server (docs/reliability.md, "Limits").
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
	// UpdateConflict is a fault for tests and benchmarks: the fraction
	// (0 to 1) of machines whose first registration is refused with
	// elemental-operator's Kubernetes conflict text (fault.go); 0: none.
	UpdateConflict float64
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
	// MaxClientSessions bounds sessions in flight from one client
	// address, NewInventoriesPerMinute the new inventories one client
	// address creates per registration and minute, MaxPendingInventories
	// the inventories waiting for an address; 0 means the default,
	// negative no limit.
	MaxClientSessions       int
	NewInventoriesPerMinute int
	MaxPendingInventories   int
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

	limits   *clientLimits
	conflict *conflictFault
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
	s.limits = newClientLimits(o)
	s.conflict = newConflictFault(o.UpdateConflict)
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
		s.reconcileAll(st, s.now())
		return true, nil
	}); err != nil {
		return nil, fmt.Errorf("server: initial reconcile: %w", err)
	}
	return s, nil
}

// ServeHTTP routes /elemental/registration/<token> (docs/regserver.md, Registration URL). The
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
		// Upstream echoes the token here (docs/regserver.md, Registration URL); a client that
		// logs the body would print it, so regserver names no token.
		http.Error(w, "failed to find machine registration with this registration token", http.StatusNotFound)
		return
	}
	url := s.registrationURL(r)
	if !protocol.IsWebSocketUpgrade(r) {
		s.servePlain(w, reg, url)
		return
	}
	client := clientAddr(r.RemoteAddr)
	if !s.limits.enter(client) {
		s.log.WithField("client", client).Warn("registration refused: the client has its share of sessions in flight (--max-client-sessions)")
		w.Header().Set("Retry-After", "5")
		http.Error(w, fmt.Sprintf("too many registration sessions in flight from %s (limit %d); try again", client, s.limits.maxSessions), http.StatusTooManyRequests)
		return
	}
	defer s.limits.leave(client)
	if !s.acquireSession(r) {
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many registration sessions in flight; try again", http.StatusServiceUnavailable)
		return
	}
	defer func() { <-s.sessions }()
	auth := s.authFor(reg)
	h := &session{srv: s, reg: reg, url: url, client: r.RemoteAddr,
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
// rebuilds it (docs/protocol.md, the config reply).
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
// without authentication, as upstream does (docs/regserver.md, Registration URL and plain GET).
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
