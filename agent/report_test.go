package agent

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/agent/netreport"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/state"
	"github.com/nodereg/nodereg/internal/testutil"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testbin"
	"github.com/nodereg/nodereg/protocol"
)

// nmstateConfig is an nmstate config for the machine's NIC (node.NIC) at
// 10.0.0.7/24.
func nmstateConfig(t *testing.T) *protocol.NetworkConfig {
	var nc protocol.NetworkConfig
	testutil.Must(t, yaml.Unmarshal([]byte(`configurator: nmstate
ipAddresses:
  ip: 10.0.0.7
config:
  interfaces:
  - name: `+node.NIC+`
    type: ethernet
    state: up
    ipv4: {enabled: true, dhcp: false, address: [{ip: "{ip}", prefix-length: 24}]}
`), &nc))
	return &nc
}

// A failed apply is kept in the state file and reported on the next
// registration, per interface, with its phase and kind; a rollback after
// the reachability check likewise; a later apply that succeeds clears it.
// The server is the protocol's real server side; nmstatectl the stand-in.
func TestNetworkErrorsAreReportedUntilAnApplySucceeds(t *testing.T) {
	t.Setenv(host.EnvNmstatectl, testbin.NmstatectlStub(t))
	s := &scriptedServer{script: script{gets: []answer{{reply: &protocol.ConfigReply{Network: nmstateConfig(t)}}}}}
	var unhealthy atomic.Bool // plain GETs (the reachability check) answer 503
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !protocol.IsWebSocketUpgrade(r) {
			if unhealthy.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
			return
		}
		_ = protocol.Accept(w, r, protocol.ServerOptions{Auth: []protocol.ServerAuthenticator{protocol.PlainServer{}}, Log: testutil.TestLog(t)}, s)
	})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	m := node.New(t, "52:54:00:aa:00:26", srv.URL+"/elemental/registration/token", "    no-smbios: true\n")
	run := func() (*state.State, error) {
		_, err := Run(t.Context(), Options{
			Root: m.Root, Runner: m.Runner(), Clock: retrytest.NewClock(time.Now()),
			Deadline: time.Minute, NetworkTimeout: time.Minute, ReachabilityWindow: 2 * time.Second,
		})
		st, _, lErr := state.Load(host.Root(m.Root), host.StateFile)
		testutil.Must(t, lErr)
		return st, err
	}

	// 1: NetworkManager (nmstatectl apply) refuses the config.
	t.Setenv("NMSTATECTL_STUB_FAIL", "apply")
	st, err := run()
	var pe *PhaseError
	if !errors.As(err, &pe) || pe.Phase != PhaseApply {
		t.Fatalf("run 1: %v, want an apply failure", err)
	}
	if st.NetworkErrorKind != netreport.KindNMRefused || st.NetworkErrorPhase != string(PhaseApply) || st.NetworkErrorInterfaces != node.NIC || !st.Registered() {
		t.Fatalf("run 1: state %+v, want the NM refusal on %s kept with the registration", st, node.NIC)
	}

	// 2: the error goes out; this apply is rolled back after the check.
	t.Setenv("NMSTATECTL_STUB_FAIL", "")
	unhealthy.Store(true)
	st, err = run()
	if !errors.Is(err, apply.ErrRolledBack) || st.NetworkErrorKind != netreport.KindRolledBack {
		t.Fatalf("run 2: %v, state %+v: want a rollback kept", err, st)
	}
	sent := s.seen[len(s.seen)-1]
	for k, want := range map[string]string{
		"network-config.state": "error", "network-config." + node.NIC + ".state": "error",
		"network-config." + node.NIC + ".error-phase": "apply", "network-config." + node.NIC + ".error-kind": "nm-refused",
	} {
		if sent[k] != want {
			t.Errorf("run 2 sent %s=%q, want %q (all: %v)", k, sent[k], want, sent)
		}
	}
	if !strings.Contains(sent["network-config."+node.NIC+".error"], "nmstatectl apply") {
		t.Errorf("run 2 sent error %q, want the failed step named", sent["network-config."+node.NIC+".error"])
	}

	// 3: healthy: the rollback is reported, then the apply clears it.
	unhealthy.Store(false)
	st, err = run()
	if err != nil || st.NetworkError != "" || st.NetworkState != netreport.StateApplied {
		t.Fatalf("run 3: %v, state %+v: want applied, no error", err, st)
	}
	sent = s.seen[len(s.seen)-1]
	if sent["network-config."+node.NIC+".error-kind"] != "rolled-back" || !strings.Contains(sent["network-config."+node.NIC+".error"], "reachability check") {
		t.Errorf("run 3 sent %v, want the rollback after the reachability check", sent)
	}

	// 4: what an applied node reports: per interface state and digest, no error.
	_, err = run()
	testutil.Must(t, err)
	sent = s.seen[len(s.seen)-1]
	if sent["network-config.state"] != "applied" || sent["network-config."+node.NIC+".state"] != "applied" || sent["network-config."+node.NIC+".digest"] != st.NetworkDigest || st.NetworkDigest == "" {
		t.Errorf("run 4 sent %v, want %s applied with digest %s", sent, node.NIC, st.NetworkDigest)
	}
	// Cleared errors go out empty: upstream never drops a stored key.
	for _, k := range []string{"network-config.error", "network-config." + node.NIC + ".error", "network-config." + node.NIC + ".error-kind"} {
		if v, ok := sent[k]; !ok || v != "" {
			t.Errorf("run 4 sent %s=%q (present %v), want it empty", k, v, ok)
		}
	}
	if _, err := os.Stat(filepath.Join(m.Root, "oem/elemental-network.yaml")); err != nil {
		t.Errorf("applied config not persisted: %v", err)
	}
}
