// Package exitcode is the agent's one table from a failure to a process exit
// status (sysexits.h), so systemd can act on it: RestartPreventExitStatus
// lists what a restart cannot fix, Restart=on-failure retries the rest. The
// in-process retry loop (agent/retry) is handed Retryable, so it asks the
// same table whether another attempt can help.
//
// Classification goes by error types and sentinels (errors.As, errors.Is),
// never by message text: a reworded message must not change an exit status.
package exitcode

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"syscall"

	"github.com/nodereg/nodereg/agent/retry"
	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/statelock"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm"
)

// The exit statuses. 130 and 143 are the shell's 128+signal.
const (
	OK          = 0
	Usage       = 64 // EX_USAGE: the command line is wrong
	TempFail    = 75 // EX_TEMPFAIL: try again later
	Config      = 78 // EX_CONFIG: a person must change something
	Interrupted = 128 + int(syscall.SIGINT)
	Terminated  = 128 + int(syscall.SIGTERM)
)

// NoRestart are the statuses a restart cannot fix: the units list them in
// RestartPreventExitStatus= (systemd/units_test.go checks it).
var NoRestart = []int{Usage, Config}

// Stopped are the statuses of a run ended on request: the units list them
// in SuccessExitStatus= so a `systemctl stop` leaves no failed unit.
var Stopped = []int{Interrupted, Terminated}

// Meaning is the README's wording of each status, for the final log line.
func Meaning(code int) string {
	switch code {
	case OK:
		return "done"
	case Usage:
		return "bad command line"
	case TempFail:
		return "try again later"
	case Config:
		return "needs a person"
	case Interrupted:
		return "stopped by SIGINT"
	case Terminated:
		return "stopped by SIGTERM"
	}
	return "unknown"
}

// UsageError is a bad command line: unknown subcommand, flag or argument,
// or a flag value that cannot mean anything.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError.
func Usagef(format string, a ...any) error {
	return &UsageError{Err: fmt.Errorf(format, a...)}
}

// ConfigError is a failure only a change of configuration (local or on the
// server) can fix: retrying would give the same answer.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Configf returns a ConfigError.
func Configf(format string, a ...any) error {
	return &ConfigError{Err: fmt.Errorf(format, a...)}
}

// StoppedError says the run was ended by a signal, not by a failure.
type StoppedError struct{ Signal syscall.Signal }

func (e *StoppedError) Error() string { return "stopped by " + signalName(e.Signal) }

func signalName(s syscall.Signal) string {
	switch s {
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return s.String()
}

// StoppedBy returns the StoppedError for an os.Signal (SIGINT, SIGTERM).
func StoppedBy(sig os.Signal) error {
	s, _ := sig.(syscall.Signal)
	return &StoppedError{Signal: s}
}

// HTTPStatus is implemented by errors that carry the HTTP status of a
// refused websocket upgrade.
type HTTPStatus interface {
	HTTPStatus() int
}

// Of maps the outcome of a run to the exit status. The rows are checked in
// order; the first that matches wins.
func Of(err error) int {
	if err == nil {
		return OK
	}
	for _, r := range table {
		if r.match(err) {
			return r.code
		}
	}
	return TempFail
}

// Retryable reports whether another attempt in the same process may
// succeed: only what the table calls "try again later" and the caller did
// not mark retry.Terminal (an exhausted pool: exit 75, but not in this
// process), nor a registration host DNS says does not exist (a typo in
// the URL: exit 75 at once, so systemd's restart, not the whole --deadline,
// tries again). It is the agent's one retry.Classifier.
func Retryable(err error) bool {
	return !retry.IsTerminal(err) && !errors.Is(err, protocol.ErrHostNotFound) && Of(err) == TempFail
}

type row struct {
	name  string
	code  int
	match func(error) bool
}

// table is the classification, first match wins. Anything it does not name
// is "try again later": network errors, timeouts, a lock held by another
// run, a spent retry deadline.
var table = []row{
	{"stopped by SIGINT", Interrupted, stoppedBy(syscall.SIGINT)},
	{"stopped by SIGTERM", Terminated, stoppedBy(syscall.SIGTERM)},
	{"command line", Usage, is[*UsageError]},
	// Another run (boot service, update timer, an admin's reset-network)
	// held the state lock for the whole wait: it will be done later.
	{"state lock held by another run", TempFail, is[*statelock.HeldError]},
	{"configuration", Config, is[*ConfigError]},
	{"server refused the upgrade", Config, func(err error) bool {
		code, ok := httpStatus(err)
		return ok && refusedOnPurpose(code)
	}},
	{"server error on the upgrade", TempFail, func(err error) bool {
		_, ok := httpStatus(err)
		return ok
	}},
	{"server refused the registration", Config, func(err error) bool {
		var er *protocol.ErrorReply
		return errors.As(err, &er) && !pendingReason(er.Reason)
	}},
	{"server has no address yet", TempFail, is[*protocol.ErrorReply]},
	{"certificate verification", Config, certificateRejected},
	{"network config the node cannot use", Config, func(err error) bool {
		return is[*apply.FieldError](err) || is[*host.ToolMissingError](err)
	}},
	// What the network policy refuses (netpolicy): the server's config
	// or the node's policy must change.
	{"network policy", Config, is[*netpolicy.Refusal]},
	// A keyfile name the config would write over a file that is not ours:
	// a person must rename one of them.
	{"keyfile not owned by the agent", Config, is[*apply.NotOwnedError]},
	{"TPM missing or unusable", Config, func(err error) bool {
		return errors.Is(err, tpm.ErrNoDevice) || errors.Is(err, tpm.ErrEmulationNotBuilt) || errors.Is(err, tpm.ErrBadSeed)
	}},
	{"update refused by an old server", Config, func(err error) bool { return errors.Is(err, protocol.ErrUpdateUnsupported) }},
	// The bootstrap network (docs/bootstrap.md): a block that does not
	// parse or validate, a machine the static table does not name or names
	// twice, a static address someone else holds: the admin's table must
	// change.
	{"bootstrap network config", Config, func(err error) bool {
		return is[*bootstrap.ConfigError](err) || is[*bootstrap.EnvError](err) || is[*bootstrap.NoMatchError](err) ||
			is[*bootstrap.AmbiguousError](err) || is[*bootstrap.TakenError](err)
	}},
	// Every range address held, or a probe that could not run (no carrier,
	// link down): another boot may find one free or the link up.
	{"bootstrap range exhausted or probe failed", TempFail, func(err error) bool {
		return is[*bootstrap.ExhaustedError](err) || errors.Is(err, bootstrap.ErrLinkDown) || errors.Is(err, bootstrap.ErrNoCarrier)
	}},
	// Last, so they only name what was "try again later" already.
	{"registration host not found in DNS", TempFail, func(err error) bool { return errors.Is(err, protocol.ErrHostNotFound) }},
	{"authentication refused (auth kind mismatch?)", TempFail, func(err error) bool { return errors.Is(err, protocol.ErrAuth) }},
}

// Cause is the name of the table row err falls in ("server refused the
// upgrade", "certificate verification", ...), for the outcome line to lead
// with; "" when no row names it.
func Cause(err error) string {
	if err == nil {
		return ""
	}
	for _, r := range table {
		if r.match(err) {
			return r.name
		}
	}
	return ""
}

func stoppedBy(sig syscall.Signal) func(error) bool {
	return func(err error) bool {
		var s *StoppedError
		return errors.As(err, &s) && s.Signal == sig
	}
}

func is[T error](err error) bool {
	var t T
	return errors.As(err, &t)
}

func httpStatus(err error) (int, bool) {
	var h HTTPStatus
	if errors.As(err, &h) && h.HTTPStatus() != 0 {
		return h.HTTPStatus(), true
	}
	return 0, false
}

// refusedOnPurpose: the statuses that say "not this request, not ever":
// 404 and 410 (the registration URL's token is unknown), 401 and 403
// (refused), 400 and 405 (not a registration endpoint). Any other status,
// 5xx, 408, 429 or one nobody expects (418), may be a proxy or a server in
// trouble: try again later.
func refusedOnPurpose(code int) bool {
	switch code {
	case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden,
		http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusGone:
		return true
	}
	return false
}

// pendingReason: the reasons a later attempt can succeed with: address
// claims still pending, and regserver's per-client limits on new machines
// (docs/regserver.md), which say when to come back (retryAfterSeconds,
// honoured by agent/retry).
func pendingReason(reason string) bool {
	switch reason {
	case protocol.ReasonWaitingForIPAddress, protocol.ReasonPoolExhausted, protocol.ReasonAllocationFailed,
		protocol.ReasonRateLimited, protocol.ReasonTooManyPending:
		return true
	}
	return false
}

// certificateRejected: the server's certificate does not verify (unknown
// CA, expired, wrong name). A retry meets the same certificate.
func certificateRejected(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
		algo     x509.InsecureAlgorithmError
		critical x509.UnhandledCriticalExtension
	)
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &algo) || errors.As(err, &critical)
}
