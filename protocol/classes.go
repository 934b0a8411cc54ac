package protocol

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"

	"github.com/nodereg/nodereg/internal/errclass"
)

// CertificateRejected classes a dial error whose cause is the server's
// certificate (unknown CA, expired, wrong name, an algorithm or extension
// the verifier refuses): a retry meets the same certificate, so a person
// must change the CA or the server. Other errors are returned as they are.
func CertificateRejected(err error) error {
	var (
		unknown  x509.UnknownAuthorityError
		invalid  x509.CertificateInvalidError
		hostname x509.HostnameError
		verify   *tls.CertificateVerificationError
		algo     x509.InsecureAlgorithmError
		critical x509.UnhandledCriticalExtension
	)
	if errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) ||
		errors.As(err, &verify) || errors.As(err, &algo) || errors.As(err, &critical) {
		return errclass.Wrap(errclass.Config, "certificate verification", err)
	}
	return err
}

// Class: a status that says "not this request, not ever" needs a person;
// any other may be a proxy or a server in trouble.
func (e *HandshakeError) Class() errclass.Class {
	if refusedOnPurpose(e.StatusCode) {
		return errclass.Config
	}
	return errclass.Transient
}

// Cause names it on the outcome line.
func (e *HandshakeError) Cause() string {
	if refusedOnPurpose(e.StatusCode) {
		return "server refused the upgrade"
	}
	return "server error on the upgrade"
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

// Class: a reason a later attempt can succeed with is transient, any
// other refusal needs a person (docs/protocol.md §7.5).
func (e *ErrorReply) Class() errclass.Class {
	if e.Pending() {
		return errclass.Transient
	}
	return errclass.Config
}

// Cause names it on the outcome line.
func (e *ErrorReply) Cause() string {
	if e.Pending() {
		return "server has no address yet"
	}
	return "server refused the registration"
}

// Pending: the reasons a later attempt can succeed with: address claims
// still pending, and regserver's per-client limits on new machines
// (docs/regserver.md), which say when to come back (retryAfterSeconds).
func (e *ErrorReply) Pending() bool {
	switch e.Reason {
	case ReasonWaitingForIPAddress, ReasonPoolExhausted, ReasonAllocationFailed,
		ReasonRateLimited, ReasonTooManyPending:
		return true
	}
	return false
}
