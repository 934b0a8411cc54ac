package protocol

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/nodereg/nodereg/internal/errclass"
)

func TestHandshakeErrorClassByStatus(t *testing.T) {
	for code, want := range map[int]errclass.Class{
		http.StatusNotFound: errclass.Config, http.StatusGone: errclass.Config, http.StatusForbidden: errclass.Config,
		http.StatusBadGateway: errclass.Transient, http.StatusTooManyRequests: errclass.Transient, http.StatusTeapot: errclass.Transient,
	} {
		err := fmt.Errorf("dial: %w", &HandshakeError{StatusCode: code, Err: errors.New("bad handshake")})
		if got, ok := errclass.Of(err); !ok || got != want {
			t.Errorf("HTTP %d: class %v (%v), want %v", code, got, ok, want)
		}
	}
}

func TestErrorReplyClassByReason(t *testing.T) {
	for reason, want := range map[string]errclass.Class{
		ReasonWaitingForIPAddress: errclass.Transient, ReasonPoolExhausted: errclass.Transient,
		ReasonRateLimited: errclass.Transient, "": errclass.Config, ReasonInventoryNotFound: errclass.Config,
	} {
		if got, _ := errclass.Of(&ErrorReply{Message: "m", Reason: reason}); got != want {
			t.Errorf("reason %q: class %v, want %v", reason, got, want)
		}
	}
}

func TestCertificateRejectedIsConfig(t *testing.T) {
	err := CertificateRejected(fmt.Errorf("tls: %w", x509.UnknownAuthorityError{}))
	if !errclass.Is(err, errclass.Config) || errclass.CauseOf(err) != "certificate verification" {
		t.Errorf("unknown authority: %v %q", err, errclass.CauseOf(err))
	}
	if !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Error("the x509 error is hidden")
	}
	plain := errors.New("connection refused")
	if CertificateRejected(plain) != plain {
		t.Error("a network error was classed")
	}
	if _, ok := errclass.Of(ErrHostNotFound); !ok || !errclass.Is(ErrHostNotFound, errclass.Final) {
		t.Error("a host DNS does not know is not final")
	}
}
