package e2e

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"github.com/nodereg/nodereg/internal/testutil"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server/tpmauth"
	"github.com/nodereg/nodereg/tpm"
	"github.com/nodereg/nodereg/tpm/tpmtest"
	"github.com/nodereg/nodereg/tpm/wire"
)

// recordingAuth wraps the real TPM verifier; mutate may change the header
// on its way in (a tampering proxy).
type recordingAuth struct {
	mu      sync.Mutex
	inner   protocol.ServerAuthenticator
	mutate  func(string) string
	headers []string
	errs    []error
	// refused, when set, is called after a verdict that refused.
	refused func()
}

func (a *recordingAuth) Accepts(h string) bool { return a.inner.Accepts(h) }

func (a *recordingAuth) Authenticate(ctx context.Context, h string, c protocol.RawConn) (protocol.Identity, error) {
	if a.mutate != nil {
		h = a.mutate(h)
	}
	id, err := a.inner.Authenticate(ctx, h, c)
	a.mu.Lock()
	a.headers = append(a.headers, h)
	a.errs = append(a.errs, err)
	a.mu.Unlock()
	if err != nil && a.refused != nil {
		a.refused()
	}
	return id, err
}

func tpmMachine(t *testing.T, mac, url, device string) *machine {
	m := newMachine(t, mac, url)
	m.WriteConfig("elemental:\n  registration:\n    url: " + url + "\n    auth: tpm\n    tpm-device: " + device + "\n")
	return m
}

func ekPEM(t *testing.T, header string) string {
	t.Helper()
	ad, err := wire.DecodeToken(header)
	testutil.Must(t, err)
	return string(ad.EK)
}

// A full registration with auth: tpm against regserver with swtpm, without
// and with an EK certificate; the second run reuses the cached AK and
// creates no key.
func TestSwtpmRegistration(t *testing.T) {
	for _, withCert := range []bool{false, true} {
		name := map[bool]string{false: "bare EK", true: "EK certificate"}[withCert]
		t.Run(name, func(t *testing.T) {
			sw := tpmtest.StartSwtpm(t, withCert)
			rec := &recordingAuth{inner: tpmauth.New(tpmauth.Options{})}
			rs := &regServer{t: t, cfg: tpmServerConfig("192.168.122.150-192.168.122.200", nmstateTemplate), storePath: t.TempDir() + "/store.json", auth: []protocol.ServerAuthenticator{rec, protocol.PlainServer{}}}
			useStubNmstatectl(t)
			rs.start()
			t.Cleanup(func() { rs.http.Close() })
			m := tpmMachine(t, "52:54:00:00:20:01", rs.url(), sw.Device())

			res, err := m.run(nil)
			if got := address(t, res, err); got != "192.168.122.150" {
				t.Fatalf("address %s", got)
			}
			if len(res.TPMHash) != 64 || res.TPM.Create != 1 {
				t.Errorf("cold run: hash %q, counts %+v (want one AK creation)", res.TPMHash, res.TPM)
			}
			t.Logf("cold: %d TPM commands, %d CreatePrimary, %d Create", res.TPM.Commands, res.TPM.CreatePrimary, res.TPM.Create)
			if res.TPM.Commands > 17 {
				t.Errorf("cold registration used %d TPM commands, more than 17", res.TPM.Commands)
			}
			pemText := ekPEM(t, rec.headers[0])
			wantBlock := map[bool]string{false: "-----BEGIN PUBLIC KEY-----", true: "-----BEGIN CERTIFICATE-----"}[withCert]
			if !strings.HasPrefix(pemText, wantBlock) {
				t.Errorf("token EK is %q..., want %s", pemText[:30], wantBlock)
			}
			var inv []struct{ Hash string }
			getJSON(t, rs.http.URL+"/admin/inventories", &inv)
			if len(inv) != 1 || inv[0].Hash != res.TPMHash {
				t.Errorf("server inventories %+v, agent hash %s", inv, res.TPMHash)
			}

			res2, err := m.run(nil)
			if err != nil || !res2.Updated || res2.TPMHash != res.TPMHash {
				t.Fatalf("warm run: %+v %v", res2, err)
			}
			if res2.TPM.KeyCreations() != 0 {
				t.Errorf("warm run created keys: %+v", res2.TPM)
			}
			t.Logf("warm: %d TPM commands, %d key creations", res2.TPM.Commands, res2.TPM.KeyCreations())
		})
	}
}

// anotherEKChallenger answers every token with a challenge encrypted to a
// different EK: what a man in the middle would have to do.
type anotherEKChallenger struct {
	key *rsa.PrivateKey
	// answered, when set, is called once the agent has answered (or
	// dropped) the challenge.
	answered func()
}

func (anotherEKChallenger) Accepts(h string) bool { return strings.HasPrefix(h, protocol.PrefixTPM) }

func (a anotherEKChallenger) Authenticate(ctx context.Context, h string, c protocol.RawConn) (protocol.Identity, error) {
	ad, err := wire.DecodeToken(h)
	if err != nil {
		return protocol.Identity{}, err
	}
	akName, err := tpmauth.VerifyAK(ad.AK)
	if err != nil {
		return protocol.Identity{}, err
	}
	msg, _, err := tpmauth.MakeChallenge(rand.Reader, &a.key.PublicKey, akName)
	if err != nil {
		return protocol.Identity{}, err
	}
	if err := c.WriteRaw(msg); err != nil {
		return protocol.Identity{}, err
	}
	_, err = c.ReadRaw()
	if a.answered != nil {
		a.answered()
	}
	return protocol.Identity{}, errors.Join(protocol.ErrAuth, err, errors.New("challenge was for another EK"))
}

func TestChallengeForAnotherEKFails(t *testing.T) {
	// Parallel: each waits out its deadline on its own swtpm and
	// server; authentication fails before any tool would run.
	t.Parallel()
	sw := tpmtest.StartSwtpm(t, false)
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	testutil.Must(t, err)
	// The activation error is retried until the deadline: the run is
	// stopped once the agent has met one challenge instead, and the
	// deadline only bounds a hang (the AK is made inside it, and swtpm
	// alone took 7 s under stress-ng).
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rs := &regServer{t: t, cfg: tpmServerConfig("192.168.122.150-192.168.122.200", nmstateTemplate), storePath: t.TempDir() + "/store.json", auth: []protocol.ServerAuthenticator{anotherEKChallenger{key: key, answered: stop}}}
	rs.start()
	t.Cleanup(func() { rs.http.Close() })
	m := tpmMachine(t, "52:54:00:00:21:01", rs.url(), sw.Device())
	before := testutil.Tree(t, m.Root)
	o := m.options(io.Discard)
	o.Deadline = 45 * time.Second
	_, err = agent.Run(ctx, o)
	if !errors.Is(err, tpm.ErrActivation) {
		t.Errorf("challenge for another EK: %v, want the activation error", err)
	}
	if !strings.Contains(err.Error(), "another TPM") {
		t.Errorf("error does not tell the operator what happened: %v", err)
	}
	if d := testutil.TreeDiff(before, testutil.Tree(t, m.Root)); d != "" {
		t.Error("failed authentication changed the root")
	}
}

func TestTamperedTokenIsRejectedByRegserver(t *testing.T) {
	// Parallel: each waits out its deadline on its own swtpm and
	// server; authentication fails before any tool would run.
	t.Parallel()
	sw := tpmtest.StartSwtpm(t, false)
	rec := &recordingAuth{inner: tpmauth.New(tpmauth.Options{}), mutate: func(h string) string {
		ad, err := wire.DecodeToken(h)
		if err != nil {
			return h
		}
		ad.AK.CreateAttestation[len(ad.AK.CreateAttestation)-1] ^= 1
		tok, err := wire.EncodeToken(*ad)
		if err != nil {
			return h
		}
		return tok
	}}
	rs := &regServer{t: t, cfg: tpmServerConfig("192.168.122.150-192.168.122.200", nmstateTemplate), storePath: t.TempDir() + "/store.json", auth: []protocol.ServerAuthenticator{rec}}
	rs.start()
	t.Cleanup(func() { rs.http.Close() })
	m := tpmMachine(t, "52:54:00:00:22:01", rs.url(), sw.Device())
	// An authentication refusal is transient, so the agent would retry it
	// until its deadline: the run is stopped once the server has refused
	// one token instead. The deadline only bounds a hang, as the AK is made
	// inside it and swtpm alone took 7 s under stress-ng.
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rec.refused = stop
	o := m.options(io.Discard)
	o.Deadline = 45 * time.Second
	_, err := agent.Run(ctx, o)
	if err == nil {
		t.Fatal("tampered token accepted")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.errs) == 0 || !errors.Is(rec.errs[0], protocol.ErrAuth) || !errors.Is(rec.errs[0], tpmauth.ErrInvalidAK) {
		t.Errorf("server verdicts %v, want an invalid-AK rejection", rec.errs)
	}
	if !errors.Is(err, protocol.ErrAuth) {
		t.Errorf("agent error %v does not say authentication failed", err)
	}
}
