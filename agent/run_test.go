package agent

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/handover"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/protocol"
)

// scriptedServer is the protocol's real server side on loopback with a
// handler that answers from a script: each Get and each explicit
// MsgNetworkConfig takes the next answer of its list (the last one
// repeats).
type scriptedServer struct {
	mu sync.Mutex
	script
	// seen is every session's annotations, in order; asked counts the
	// explicit questions.
	seen  []map[string]string
	asked int
}

// script is what a scriptedServer answers.
type script struct {
	gets, explicit []answer
}

type answer struct {
	reply *protocol.ConfigReply   // for Get
	net   *protocol.NetworkConfig // for MsgNetworkConfig
	err   error
}

func (s *scriptedServer) next(l []answer, n int) answer {
	if n >= len(l) {
		n = len(l) - 1
	}
	return l[n]
}

func (s *scriptedServer) Update(context.Context, *protocol.ServerSession) error { return nil }

func (s *scriptedServer) Get(_ context.Context, ss *protocol.ServerSession) (*protocol.ConfigReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.next(s.gets, len(s.seen))
	s.seen = append(s.seen, ss.Annotations)
	return a.reply, a.err
}

func (s *scriptedServer) NetworkConfig(context.Context, *protocol.ServerSession) (*protocol.NetworkConfig, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.next(s.explicit, s.asked)
	s.asked++
	return a.net, a.err
}

func (s *scriptedServer) start(t *testing.T) string {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !protocol.IsWebSocketUpgrade(r) {
			return
		}
		_ = protocol.Accept(w, r, protocol.ServerOptions{Auth: []protocol.ServerAuthenticator{protocol.PlainServer{}}, Log: testutil.TestLog(t)}, s)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL + "/elemental/registration/token"
}

// keyfileConfig is an nmconnections config whose one address is the
// placeholder {ip}; addresses fills it (nil: pending).
func keyfileConfig(addresses map[string]string) *protocol.NetworkConfig {
	var nc protocol.NetworkConfig
	if err := yaml.Unmarshal([]byte(`configurator: nmconnections
config:
  eth0: |
    [connection]
    id=eth0
    type=ethernet
    interface-name=eth0

    [ipv4]
    method=manual
    address1={ip}/24
`), &nc); err != nil {
		panic(err)
	}
	nc.IPAddresses = addresses
	return &nc
}

var (
	resolved = map[string]string{"ip": "10.0.0.7"}
	waiting  = &protocol.ErrorReply{Message: "1 claim pending", Reason: protocol.ReasonWaitingForIPAddress, RetryAfterSeconds: 7}
)

// runScripted runs the agent (a dry run: the decision is under test, not
// the host) against s, with the fake clock; mode is network-config.
func runScripted(t *testing.T, s *scriptedServer, mode string) (*Result, *retrytest.Clock, error) {
	t.Helper()
	url := s.start(t)
	m := node.New(t, "52:54:00:aa:00:01", url, "    no-smbios: true\n")
	clock := retrytest.NewClock(time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC))
	var out strings.Builder
	res, err := Run(t.Context(), Options{
		Root: m.Root, DryRun: true, Out: &out, Clock: clock,
		Deadline: time.Minute, NetworkTimeout: time.Minute,
		Overrides: localconfig.Overrides{NetworkConfig: &mode},
	})
	return res, clock, err
}

func TestFetchNetworkDecisions(t *testing.T) {
	unresolved := keyfileConfig(nil)
	for _, c := range []struct {
		name     string
		mode     string
		server   script
		wantAddr string // "" : no network config
		wantExit int
		// gets and asked: the registrations and explicit questions the
		// server saw; waits: the fake clock's waits (nil: only their
		// number, nwaits, is fixed: the backoff has jitter).
		gets, asked int
		waits       []time.Duration
		nwaits      int
		// pendingReported: the re-registration said network-config.state
		// pending.
		pendingReported bool
	}{
		{name: "embedded", mode: localconfig.NetworkAuto,
			server:   script{gets: []answer{{reply: &protocol.ConfigReply{Network: keyfileConfig(resolved)}}}},
			wantAddr: "10.0.0.7", gets: 1},
		{name: "no config for this machine", mode: localconfig.NetworkAuto,
			server: script{gets: []answer{{reply: &protocol.ConfigReply{}}}},
			gets:   1},
		{name: "announced explicit", mode: localconfig.NetworkAuto,
			server: script{
				gets:     []answer{{reply: &protocol.ConfigReply{ExplicitNetworkConfig: true}}},
				explicit: []answer{{net: keyfileConfig(resolved)}}},
			wantAddr: "10.0.0.7", gets: 1, asked: 1},
		{name: "forced explicit", mode: localconfig.NetworkExplicit,
			server: script{
				gets:     []answer{{reply: &protocol.ConfigReply{}}},
				explicit: []answer{{net: keyfileConfig(resolved)}}},
			wantAddr: "10.0.0.7", gets: 1, asked: 1},
		{name: "pending, explicit: retry after the server's hint", mode: localconfig.NetworkAuto,
			server: script{
				gets:     []answer{{reply: &protocol.ConfigReply{ExplicitNetworkConfig: true}}},
				explicit: []answer{{err: waiting}, {err: waiting}, {net: keyfileConfig(resolved)}}},
			wantAddr: "10.0.0.7", gets: 1, asked: 3, waits: []time.Duration{7 * time.Second, 7 * time.Second}},
		{name: "pending, upstream: register again, reporting pending", mode: localconfig.NetworkAuto,
			server: script{gets: []answer{
				{reply: &protocol.ConfigReply{Network: unresolved}},
				{reply: &protocol.ConfigReply{Network: keyfileConfig(resolved)}}}},
			wantAddr: "10.0.0.7", gets: 2, nwaits: 1, pendingReported: true},
		{name: "unresolved placeholder from an announcing server is final", mode: localconfig.NetworkAuto,
			server:   script{gets: []answer{{reply: &protocol.ConfigReply{Network: unresolved, ExplicitNetworkConfig: true}}}},
			wantExit: exitcode.Config, gets: 1},
		{name: "pool exhausted ends the run, retryable later", mode: localconfig.NetworkExplicit,
			server: script{
				gets:     []answer{{reply: &protocol.ConfigReply{}}},
				explicit: []answer{{err: &protocol.ErrorReply{Message: "no address", Reason: protocol.ReasonPoolExhausted}}}},
			wantExit: exitcode.TempFail, gets: 1, asked: 1},
		{name: "allocation failed ends the run, retryable later", mode: localconfig.NetworkExplicit,
			server: script{
				gets:     []answer{{reply: &protocol.ConfigReply{}}},
				explicit: []answer{{err: &protocol.ErrorReply{Message: "store down", Reason: protocol.ReasonAllocationFailed}}}},
			wantExit: exitcode.TempFail, gets: 1, asked: 1},
		{name: "still pending at the network timeout", mode: localconfig.NetworkExplicit,
			server: script{
				gets:     []answer{{reply: &protocol.ConfigReply{}}},
				explicit: []answer{{err: &protocol.ErrorReply{Message: "1 claim pending", Reason: protocol.ReasonWaitingForIPAddress, RetryAfterSeconds: 25}}}},
			wantExit: exitcode.TempFail, gets: 1, asked: 4, waits: []time.Duration{25 * time.Second, 25 * time.Second, 10 * time.Second}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &scriptedServer{script: c.server}
			res, clock, err := runScripted(t, s, c.mode)
			if got := exitcode.Of(err); got != c.wantExit {
				t.Fatalf("exit %d (%v), want %d", got, err, c.wantExit)
			}
			var pe *PhaseError
			if err != nil && (!errors.As(err, &pe) || pe.Phase != PhaseFetchNetwork) {
				t.Errorf("error %v does not name phase %s", err, PhaseFetchNetwork)
			}
			if got := res.Addresses["ip"]; got != c.wantAddr {
				t.Errorf("address %q, want %q", got, c.wantAddr)
			}
			if len(s.seen) != c.gets || s.asked != c.asked {
				t.Errorf("server saw %d registrations and %d explicit questions, want %d and %d", len(s.seen), s.asked, c.gets, c.asked)
			}
			if got := clock.Waits(); (c.waits != nil && !slices.Equal(got, c.waits)) || (c.waits == nil && len(got) != c.nwaits) {
				t.Errorf("waits %v, want %v (%d)", got, c.waits, c.nwaits)
			}
			if len(s.seen) == 0 {
				return
			}
			last := s.seen[len(s.seen)-1]["network-config.state"]
			if (last == netreport.StatePending) != c.pendingReported {
				t.Errorf("last registration reported network-config.state %q", last)
			}
		})
	}
}

// statusRecorder is a Notifier that keeps the phases whose start it saw.
type statusRecorder struct {
	nopNotifier
	started []Phase
}

func (n *statusRecorder) Status(phase, detail string) {
	if detail == "started" {
		n.started = append(n.started, Phase(phase))
	}
}

// A run goes through Phases(mode), in order, and nothing else.
func TestRunFollowsThePhaseList(t *testing.T) {
	for _, mode := range []Mode{ModeBoot, ModeReset} {
		s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
		m := node.New(t, "52:54:00:aa:00:02", s.start(t), "    no-smbios: true\n")
		t.Setenv(host.EnvElemental, "/bin/true")
		rec := &statusRecorder{}
		var out strings.Builder
		if _, err := Run(t.Context(), Options{Root: m.Root, Mode: mode, Out: &out, Notifier: rec, Clock: retrytest.NewClock(time.Now())}); err != nil {
			t.Fatalf("mode %d: %v", mode, err)
		}
		if want := Phases(mode); !slices.Equal(rec.started, want) {
			t.Errorf("mode %d: phases %q, want %q", mode, rec.started, want)
		}
	}
}

// A reset under a scratch root (Options.PersistOnly) writes the hook and the
// state under the root but does not run the toolkit, which would reset this
// very host, and keeps the reset trigger; without PersistOnly the same run
// runs it.
func TestHandOverUnderAScratchRootDoesNotRunTheToolkit(t *testing.T) {
	for _, persistOnly := range []bool{true, false} {
		s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
		m := node.New(t, "52:54:00:aa:00:03", s.start(t), "    no-smbios: true\n")
		ran := filepath.Join(t.TempDir(), "elemental-ran")
		toolkit := filepath.Join(t.TempDir(), "elemental")
		testutil.Must(t, os.WriteFile(toolkit, []byte("#!/bin/sh\ntouch "+ran+"\n"), 0o755))
		t.Setenv(host.EnvElemental, toolkit)
		trigger := filepath.Join(m.Root, host.ResetCloudConfig)
		testutil.Must(t, os.MkdirAll(filepath.Dir(trigger), 0o755))
		testutil.Must(t, os.WriteFile(trigger, []byte("#reset\n"), 0o600))
		var log testutil.Log
		if _, err := Run(t.Context(), Options{Root: m.Root, Mode: ModeReset, PersistOnly: persistOnly, Log: log.Entry(), Clock: retrytest.NewClock(time.Now())}); err != nil {
			t.Fatalf("persist-only %v: %v", persistOnly, err)
		}
		if _, err := os.Stat(filepath.Join(m.Root, handover.HookPath)); err != nil {
			t.Errorf("persist-only %v: hook not written under the root: %v", persistOnly, err)
		}
		_, ranErr := os.Stat(ran)
		_, triggerErr := os.Stat(trigger)
		if persistOnly {
			if ranErr == nil || triggerErr != nil || !strings.Contains(log.String(), "not running") {
				t.Errorf("persist-only: toolkit ran (%v), trigger gone (%v), or no line saying it was not run:\n%s", ranErr == nil, triggerErr, log.String())
			}
		} else if ranErr != nil || triggerErr == nil {
			t.Errorf("live: toolkit not run (%v) or trigger kept", ranErr)
		}
	}
}

// The hand-over's state is on disk when the toolkit runs (a reset reboots
// at its end, and must not lose the new registration): the runner saves it
// between the hook and the toolkit.
func TestHandOverSavesTheStateBeforeTheToolkit(t *testing.T) {
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{}}}}}
	m := node.New(t, "52:54:00:aa:00:04", s.start(t), "    no-smbios: true\n")
	seen := filepath.Join(t.TempDir(), "state-seen")
	toolkit := filepath.Join(t.TempDir(), "elemental")
	testutil.Must(t, os.WriteFile(toolkit, []byte("#!/bin/sh\ncp '"+filepath.Join(m.Root, host.StateFile)+"' '"+seen+"'\n"), 0o755))
	t.Setenv(host.EnvElemental, toolkit)
	if _, err := Run(t.Context(), Options{Root: m.Root, Mode: ModeReset, Clock: retrytest.NewClock(time.Now())}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatalf("the toolkit found no state file: %v", err)
	}
	if !strings.Contains(string(b), "nodereg-last-phase: hand-over") || !strings.Contains(string(b), "initialRegistration") {
		t.Errorf("the toolkit found the state\n%s\nwant the hand-over's, with the registration", b)
	}
}
