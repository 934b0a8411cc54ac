package exitcode_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/nodereg/nodereg/agent/exitcode"
	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/agent/retry/retrytest"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/statelock"
	"github.com/nodereg/nodereg/internal/testutil/node"
	"github.com/nodereg/nodereg/internal/testutil/testpki"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm"
)

// wrapped hides err the way a run does: a conversation step, a retry
// verdict, a phase.
func wrapped(err error) error {
	return fmt.Errorf("register: %w", fmt.Errorf("registration: attempt 1 failed, not retrying: %w", &protocol.StepError{Step: protocol.StepDial, Err: err}))
}

func expect(t *testing.T, err error, want int) {
	t.Helper()
	if got := exitcode.Of(err); got != want {
		t.Errorf("Of(%v) = %d, want %d", err, got, want)
	}
	if got := exitcode.Of(wrapped(err)); got != want {
		t.Errorf("Of(wrapped %v) = %d, want %d", err, got, want)
	}
	if got, wantRetry := exitcode.Retryable(err), want == exitcode.TempFail; got != wantRetry {
		t.Errorf("Retryable(%v) = %v, want %v", err, got, wantRetry)
	}
}

func TestDone(t *testing.T) {
	if got := exitcode.Of(nil); got != 0 {
		t.Fatalf("Of(nil) = %d, want 0", got)
	}
}

func TestCommandLineIs64(t *testing.T) {
	expect(t, exitcode.Usagef("unknown flag --bogus"), 64)
}

func TestSignalsAre130And143(t *testing.T) {
	expect(t, exitcode.StoppedBy(os.Interrupt), 130)
	expect(t, exitcode.StoppedBy(syscall.SIGTERM), 143)
	if got := exitcode.StoppedBy(syscall.SIGTERM).Error(); got != "stopped by SIGTERM" {
		t.Errorf("message %q", got)
	}
}

func TestStateLockHeldIs75(t *testing.T) {
	path := t.TempDir() + "/" + statelock.Name
	held, err := statelock.Acquire(t.Context(), path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Release()
	_, err = statelock.Acquire(t.Context(), path, 0)
	var he *statelock.HeldError
	if !errors.As(err, &he) {
		t.Fatalf("second Acquire: %v, want a *statelock.HeldError", err)
	}
	expect(t, err, 75)
}

func TestConfigErrorIs78(t *testing.T) {
	expect(t, errclass.Configf("config.yaml: elemental.registration.url: empty"), 78)
}

// dial runs a real websocket dial against srv, as the agent does.
func dial(t *testing.T, url, ca string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cc, err := protocol.Dial(ctx, protocol.DialOptions{URL: url, CACert: ca, NoSystemPool: ca != "", HandshakeTimeout: 5 * time.Second}, protocol.Plain{AuthKind: "mac", ID: "00:11:22:33:44:55"})
	if err == nil {
		cc.Close()
		t.Fatal("dial succeeded")
	}
	return err
}

func statusServer(t *testing.T, code int) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no", code)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/elemental/registration/token"
}

func TestRegistrationNotFoundIs78(t *testing.T) {
	err := dial(t, statusServer(t, http.StatusNotFound), "")
	var he *protocol.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != 404 {
		t.Fatalf("dial error %v is not a 404 HandshakeError", err)
	}
	expect(t, err, 78)
	expect(t, dial(t, statusServer(t, http.StatusForbidden), ""), 78)
}

func TestServerErrorOnUpgradeIs75(t *testing.T) {
	expect(t, dial(t, statusServer(t, http.StatusServiceUnavailable), ""), 75)
	expect(t, dial(t, statusServer(t, http.StatusTooManyRequests), ""), 75)
	expect(t, dial(t, statusServer(t, http.StatusTeapot), ""), 75)
}

func TestServerRefusalIs78(t *testing.T) {
	expect(t, &protocol.ErrorReply{Message: "failed to create MachineInventory"}, 78)
	expect(t, &protocol.ErrorReply{Reason: protocol.ReasonInventoryNotFound, Message: "MachineInventory not found"}, 78)
}

func TestPendingAddressesAndPoolExhaustedAre75(t *testing.T) {
	expect(t, &protocol.ErrorReply{Reason: protocol.ReasonWaitingForIPAddress}, 75)
	expect(t, &protocol.ErrorReply{Reason: protocol.ReasonPoolExhausted}, 75)
	expect(t, &protocol.ErrorReply{Reason: protocol.ReasonAllocationFailed}, 75)
}

// regserver's per-client limits are try-again-later, after the wait the
// server names: the retry loop waits retryAfterSeconds, not its own curve.
func TestRateLimitedAndTooManyPendingAre75AfterTheHint(t *testing.T) {
	for _, reason := range []string{protocol.ReasonRateLimited, protocol.ReasonTooManyPending} {
		refusal := &protocol.ErrorReply{Message: "slow down", Reason: reason, RetryAfterSeconds: 42}
		expect(t, refusal, 75)
		var waits []time.Duration
		attempts := 0
		p := retry.Policy{Deadline: time.Hour, Initial: time.Millisecond, Max: time.Millisecond, Retryable: exitcode.Retryable,
			Clock: retrytest.NewClock(time.Unix(0, 0)), OnWait: func(_ int, d time.Duration, _ error) { waits = append(waits, d) }}
		err := p.Do(context.Background(), "registration", func(context.Context, int) error {
			if attempts++; attempts < 2 {
				return wrapped(refusal)
			}
			return nil
		})
		if err != nil || attempts != 2 || len(waits) != 1 || waits[0] != 42*time.Second {
			t.Errorf("%s: %d attempts, waits %v, err %v; want 2 attempts after one wait of 42s", reason, attempts, waits, err)
		}
	}
}

// selfSigned makes a server certificate for 127.0.0.1 valid from
// notBefore to notAfter, returned with the PEM of the CA that signed it.
func selfSigned(t *testing.T, notBefore, notAfter time.Time) (tls.Certificate, []byte) {
	t.Helper()
	ca := testpki.New(t, "regserver")
	return testpki.KeyPair(t)(ca.IssueWindowPEM(t, notBefore, notAfter, "127.0.0.1")), ca.CertPEM()
}

func tlsServer(t *testing.T, cert tls.Certificate) string {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv.URL + "/elemental/registration/token"
}

func TestUnknownCAIs78(t *testing.T) {
	now := time.Now()
	cert, _ := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	_, otherCA := selfSigned(t, now.Add(-time.Hour), now.Add(time.Hour))
	err := dial(t, tlsServer(t, cert), string(otherCA))
	if !errors.As(err, new(*tls.CertificateVerificationError)) {
		t.Fatalf("dial error %v is not a certificate verification error", err)
	}
	expect(t, err, 78)
}

func TestExpiredCertificateIs78(t *testing.T) {
	now := time.Now()
	cert, caPEM := selfSigned(t, now.Add(-48*time.Hour), now.Add(-24*time.Hour))
	err := dial(t, tlsServer(t, cert), string(caPEM))
	var invalid x509.CertificateInvalidError
	if !errors.As(err, &invalid) || invalid.Reason != x509.Expired {
		t.Fatalf("dial error %v is not an expired-certificate error", err)
	}
	expect(t, err, 78)
}

func TestNetworkConfigNodeCannotUseIs78(t *testing.T) {
	expect(t, &apply.FieldError{Path: "config.interfaces[0].name", Reason: "bad"}, 78)
	expect(t, &host.ToolMissingError{Tool: "nmstatectl", Err: errors.New("not found")}, 78)
}

func TestTPMMissingIs78(t *testing.T) {
	expect(t, fmt.Errorf("opening: %w", tpm.ErrNoDevice), 78)
	expect(t, tpm.ErrEmulationNotBuilt, 78)
}

func TestUpdateUnsupportedIs78(t *testing.T) {
	expect(t, protocol.ErrUpdateUnsupported, 78)
}

func TestNetworkFailuresAre75(t *testing.T) {
	// A port nothing listens on: connection refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	expect(t, dial(t, "http://"+addr+"/elemental/registration/token", ""), 75)
	expect(t, context.DeadlineExceeded, 75)
	expect(t, fmt.Errorf("registration: giving up: %w: %w", retry.ErrDeadline, errors.New("i/o timeout")), 75)
	expect(t, tpm.ErrBusy, 75)
	expect(t, &bootstrap.DeadlineError{Deadline: time.Second, Probed: 3, Held: 3}, 75)
}

// The retry loop stops at once on a "needs a person" error, so a bad CA or
// an unknown registration never spends the 10-minute deadline.
func TestRetryStopsOnNeedsAPerson(t *testing.T) {
	attempts := 0
	// Virtual time: the waits end at once, whatever the machine's load.
	p := retry.Policy{Deadline: time.Hour, Retryable: exitcode.Retryable, Clock: retrytest.NewClock(time.Unix(0, 0))}
	err := p.Do(context.Background(), "registration", func(ctx context.Context, _ int) error {
		attempts++
		return dial(t, statusServer(t, http.StatusNotFound), "")
	})
	if attempts != 1 || exitcode.Of(err) != 78 {
		t.Fatalf("404: %d attempts, exit %d (%v); want 1 attempt, 78", attempts, exitcode.Of(err), err)
	}
	attempts = 0
	err = p.Do(context.Background(), "registration", func(ctx context.Context, _ int) error {
		attempts++
		if attempts < 3 {
			return dial(t, statusServer(t, http.StatusBadGateway), "")
		}
		return nil
	})
	if attempts != 3 || err != nil {
		t.Fatalf("502: %d attempts (%v); want 3 and success", attempts, err)
	}
}

// A registration host DNS does not know is 75, but not retried in the
// process: the first attempt ends the run instead of the whole deadline.
func TestHostNotFoundIs75WithoutRetry(t *testing.T) {
	attempts := 0
	// Virtual time: the waits end at once, whatever the machine's load.
	p := retry.Policy{Deadline: time.Hour, Retryable: exitcode.Retryable, Clock: retrytest.NewClock(time.Unix(0, 0))}
	err := p.Do(context.Background(), "registration", func(ctx context.Context, _ int) error {
		attempts++
		return &protocol.StepError{Step: protocol.StepDial, Err: fmt.Errorf("%w: the registration host \"x.invalid\" does not resolve: %w",
			protocol.ErrHostNotFound, &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true})}
	})
	if attempts != 1 || exitcode.Of(err) != 75 {
		t.Fatalf("%d attempts, exit %d (%v); want 1 attempt, 75", attempts, exitcode.Of(err), err)
	}
	// A lookup that failed otherwise (no DNS server yet at boot) is retried.
	if !exitcode.Retryable(wrapped(&net.DNSError{Err: "server misbehaving", Name: "x.invalid", IsTemporary: true})) {
		t.Error("a temporary DNS failure is not retried")
	}
}

func TestMeaningNamesEveryCode(t *testing.T) {
	for _, c := range []int{0, 64, 75, 78, 130, 143} {
		if exitcode.Meaning(c) == "unknown" {
			t.Errorf("code %d has no meaning", c)
		}
	}
}

// bootstrapConfig is a static bootstrap block with the given entries.
func bootstrapConfig(t *testing.T, entries string) *bootstrap.Config {
	t.Helper()
	c, err := bootstrap.FromConfigFile([]byte(node.BootstrapKeyfile{Key: "eth0", ID: "bootstrap-eth0", Iface: "eth0", Sources: "          static:\n" + entries}.File()))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestBootstrapTableErrorsAre78(t *testing.T) {
	_, err := bootstrap.FromConfigFile([]byte("elemental:\n  registration:\n    bootstrap-network:\n      configurator: nmc\n"))
	if err == nil {
		t.Fatal("a bootstrap block with configurator nmc was accepted")
	}
	expect(t, err, 78)

	facts := bootstrap.Facts{MACs: []string{"52:54:00:00:00:01"}, UUID: "4c4c4544-0042-3610-8052-b4c04f385631"}
	_, err = bootstrap.Preview(bootstrapConfig(t, "          - mac: 52:54:00:99:99:99\n            address: 10.0.0.5\n"), facts)
	if !errors.As(err, new(*bootstrap.NoMatchError)) {
		t.Fatalf("no matching entry: %v, want a *NoMatchError", err)
	}
	expect(t, err, 78)

	_, err = bootstrap.Preview(bootstrapConfig(t, "          - mac: 52:54:00:00:00:01\n            address: 10.0.0.5\n          - uuid: 4c4c4544-0042-3610-8052-b4c04f385631\n            address: 10.0.0.6\n"), facts)
	if !errors.As(err, new(*bootstrap.AmbiguousError)) {
		t.Fatalf("two matching entries: %v, want an *AmbiguousError", err)
	}
	expect(t, err, 78)

	expect(t, &bootstrap.TakenError{Placeholder: "boot-ip", Address: netip.MustParseAddr("10.0.0.5"), Interface: "eth0"}, 78)
}

func TestBootstrapExhaustedOrProbeFailureIs75(t *testing.T) {
	expect(t, &bootstrap.ExhaustedError{Placeholder: "boot-ip", Range: "10.0.0.100-10.0.0.101"}, 75)
	expect(t, fmt.Errorf("probing 10.0.0.5: %w", bootstrap.ErrNoCarrier), 75)
	expect(t, fmt.Errorf("probing 10.0.0.5: %w", bootstrap.ErrLinkDown), 75)
}

func TestKeyfileNotOwnedIs78(t *testing.T) {
	expect(t, fmt.Errorf("plan: %w", &apply.NotOwnedError{Path: "/etc/NetworkManager/system-connections/eth0.nmconnection"}), 78)
}

// The busy TPM, the bootstrap walk's deadline and a rolled-back live apply
// declare their class rather than fall through to the default; a live
// apply's class is its failed step's when that step has one.
func TestErrorsDeclareTheirClass(t *testing.T) {
	live := &apply.LiveApplyError{Step: "nmstatectl apply", Err: errors.New("exit status 1")}
	for _, err := range []error{tpm.ErrBusy, &bootstrap.DeadlineError{Deadline: time.Second}, live} {
		if c, ok := errclass.Of(err); !ok || c != errclass.Transient {
			t.Errorf("errclass.Of(%v) = %v, %v; want transient, declared", err, c, ok)
		}
	}
	expect(t, live, 75)
	expect(t, &apply.LiveApplyError{Step: "reachability check", Err: errclass.Configf("certificate signed by unknown authority")}, 78)
}
