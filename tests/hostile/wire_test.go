package hostile

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/protocol"
)

var plainAuth = protocol.Plain{AuthKind: "mac", ID: "52:54:00:12:34:56"}

// register runs one registration against url and decodes the reply on top
// of local, as the agent does.
func register(ctx context.Context, url string, ca []byte, local protocol.Config) (*protocol.Reply, protocol.Config, error) {
	cfg := local
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url, CACert: string(ca), NoSystemPool: ca != nil}, plainAuth)
	if err != nil {
		return nil, cfg, err
	}
	defer cc.Close()
	r, err := cc.Register(ctx, &protocol.Payloads{NoSMBIOS: true}, &cfg)
	return r, cfg, err
}

// TestAliasBombsOverTheWire: every bomb that fits in a frame reaches the
// client whole and is refused at the config step, naming the budget.
func TestAliasBombsOverTheWire(t *testing.T) {
	// Parallel: a server of its own, nothing from the environment.
	t.Parallel()
	for _, b := range bombs {
		if b.accepted {
			continue
		}
		t.Run(b.name, func(t *testing.T) {
			s := &Server{Config: b.doc()}
			url, _ := s.Start(t, false, "tok")
			_, _, err := register(t.Context(), url, nil, protocol.Config{})
			var se *protocol.StepError
			if !errors.Is(err, protocol.ErrReplyTooLarge) || !errors.As(err, &se) || se.Step != protocol.StepConfig {
				t.Fatalf("got %v", err)
			}
		})
	}
}

// TestSeedPRExplicitReply: the server of commit 342bba26 answers 0x0C with
// {"ipAddresses":…,"config":…} and no configurator; the client gets an
// nmstate config that renders with the address in place.
func TestSeedPRExplicitReply(t *testing.T) {
	s := &Server{Network: []byte(`{"ipAddresses":{"ip1":"192.168.122.10"},"config":{"interfaces":[{"name":"eth0","type":"ethernet","state":"up","ipv4":{"enabled":true,"dhcp":false,"address":[{"ip":"{ip1}","prefix-length":24}]}}],"routes":{"config":[{"destination":"0.0.0.0/0","next-hop-interface":"eth0","next-hop-address":"192.168.122.1"}]}}}`)}
	url, _ := s.Start(t, false, "tok")
	cc, err := protocol.Dial(t.Context(), protocol.DialOptions{URL: url}, plainAuth)
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	nc, err := cc.ExplicitNetworkConfig(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if nc.Configurator != protocol.ConfiguratorNmstate || nc.Unused() != "" {
		t.Fatalf("configurator %q, unused %q", nc.Configurator, nc.Unused())
	}
	r, err := apply.Render(nc)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.Digested), "192.168.122.10") || strings.Contains(string(r.Digested), "{ip1}") {
		t.Errorf("rendered:\n%s", r.Digested)
	}
}

// TestUnusedNetworkConfigIsReported: a MsgConfig network section with a
// config but configurator none is not applied, and says so.
func TestUnusedNetworkConfigIsReported(t *testing.T) {
	s := &Server{Config: []byte("elemental:\n    registration:\n        auth: mac\nconfigurator: none\nipAddresses:\n    ip1: 10.0.0.5\nconfig:\n    interfaces:\n        raw: [91, 93]\n        object: null\n")}
	url, _ := s.Start(t, false, "tok")
	r, _, err := register(t.Context(), url, nil, protocol.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Network.IsReal() || !strings.Contains(r.Network.Unused(), "not applied") {
		t.Errorf("network %+v, warning %q", r.Network, r.Network.Unused())
	}
}

// TestServerSentLocalFields: a reply naming a block device as TPM, a
// device as CA file and plain http as the next URL changes none of them
// once KeepLocal ran, and each attempt is a warning.
func TestServerSentLocalFields(t *testing.T) {
	s := &Server{Config: []byte("elemental:\n    registration:\n        url: http://evil.invalid/elemental/registration/tok\n        ca-cert: /dev/zero\n        tpm-device: /dev/sda\n        network-config: embedded\n        auth: tpm\n")}
	url, ca := s.Start(t, true, "tok")
	local := protocol.Config{Elemental: protocol.Elemental{Registration: protocol.Registration{URL: url, CACert: string(ca), NetworkConfig: "explicit"}}}
	_, merged, err := register(t.Context(), url, ca, local)
	if err != nil {
		t.Fatal(err)
	}
	warns := localconfig.KeepLocal(local, &merged)
	reg := merged.Elemental.Registration
	if reg.URL != url || reg.CACert != string(ca) || reg.TPMDevice != "" || reg.NetworkConfig != "explicit" {
		t.Errorf("after KeepLocal: %+v", reg)
	}
	if len(warns) != 4 {
		t.Errorf("warnings: %q", warns)
	}
	if _, err := protocol.TLSConfig(reg.CACert, true); err != nil {
		t.Errorf("the local CA no longer loads: %v", err)
	}
}

// TestBadInterfaceNamesFromTheServer: names NetworkManager would refuse
// are refused by render, naming the field.
func TestBadInterfaceNamesFromTheServer(t *testing.T) {
	for _, name := range []string{"enp0s31f6-management-01", "eth 0:1", "eth%d"} {
		s := &Server{Network: []byte(`{"configurator":"nmstate","config":{"interfaces":[{"name":"` + name + `","type":"ethernet","state":"up"}]}}`)}
		url, _ := s.Start(t, false, "tok")
		cc, err := protocol.Dial(t.Context(), protocol.DialOptions{URL: url}, plainAuth)
		if err != nil {
			t.Fatal(err)
		}
		nc, err := cc.ExplicitNetworkConfig(t.Context())
		cc.Close()
		if err != nil {
			t.Fatal(err)
		}
		_, err = apply.Render(nc)
		var fe *apply.FieldError
		if !errors.As(err, &fe) || fe.Path != "config.interfaces[0].name" {
			t.Errorf("%q: %v", name, err)
		}
	}
}

// TestSilentServerBounded: whatever step the server falls silent at, the
// client returns by the caller's deadline plus 1 s, though its session
// deadline is longer.
func TestSilentServerBounded(t *testing.T) {
	// Parallel: every case waits out its bound on a server of its own.
	t.Parallel()
	const bound = time.Second
	for _, silence := range []Silence{SilentTCP, SilentUpgrade, SilentVersion, SilentConfig, SilentExplicit} {
		for _, tls := range []bool{false, true} {
			name := string(silence)
			if tls {
				name += "-tls"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				s := &Server{Silence: silence}
				url, ca := s.Start(t, tls, "tok")
				ctx, cancel := context.WithTimeout(t.Context(), bound)
				defer cancel()
				start := time.Now()
				var err error
				opts := protocol.DialOptions{URL: url, CACert: string(ca), NoSystemPool: ca != nil, SessionDeadline: time.Minute, HandshakeTimeout: time.Minute}
				cc, err := protocol.Dial(ctx, opts, plainAuth)
				if err == nil {
					if silence == SilentExplicit {
						_, err = cc.ExplicitNetworkConfig(ctx)
					} else {
						_, err = cc.Register(ctx, &protocol.Payloads{NoSMBIOS: true}, &protocol.Config{})
					}
					cc.Close()
				}
				took := time.Since(start)
				if err == nil {
					t.Fatal("a silent server got an answer")
				}
				// Without the caller's bound the exchange would end at the
				// session deadline (1 min); any limit well below it shows
				// the bound ended it, and the slack keeps a loaded machine
				// from failing it.
				if limit := bound + 20*time.Second; took > limit {
					t.Errorf("returned after %s, the bound is %s (limit %s, session deadline 1 min): %v", took.Round(time.Millisecond), bound, limit, err)
				}
				t.Logf("%s: %v", took.Round(time.Millisecond), err)
			})
		}
	}
}
