package agent

import (
	"context"
	"crypto/x509"
	"errors"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/protocol"
)

// trustedCA is the PEM text a connection trusts: the config's (a file named
// in the config or on the command line is read under --root), or during a
// CA rotation the CA in force and the pending one (docs/ca-rotation.md).
// A config CA that cannot be read is an error, never no CA (the system
// pool).
func (e *env) trustedCA(ph *phase, reg protocol.Registration) (string, error) {
	configCA, err := localconfig.CA(ph.files, reg.CACert)
	if err != nil {
		return "", &errclass.ConfigError{Err: err}
	}
	ca, err := catrust.Trust{Files: ph.files}.Bundle(configCA)
	if err != nil {
		ph.log.WithError(err).Warn("rotated CA unreadable: trusting the config's ca-cert only")
	}
	return ca, nil
}

// caAnnouncement is what one registration conversation says about the
// server's CA: the registration it dialled with, the ca-cert its reply
// sent, and the certificates the server presented.
type caAnnouncement struct {
	reg  protocol.Registration
	sent string
	peer []*x509.Certificate
}

// rotateCA proves or drops a CA kept pending by an earlier run, then
// decides on the CA the server announced over the conversation a phase
// went on with (a, once its retries are over: no attempt writes CA
// files). A dry run writes nothing, so it rotates nothing.
func (e *env) rotateCA(ctx context.Context, ph *phase, a caAnnouncement) {
	if e.o.DryRun {
		return
	}
	log, reg, sent, peer := ph.log, a.reg, a.sent, a.peer
	t := catrust.Trust{Files: ph.files}
	out, err := t.Promote(ctx, reg.URL)
	switch {
	case out == catrust.Promoted:
		log.Info("the new CA verified the server on its own: it is now the only one trusted, the old one is dropped")
	case out == catrust.Dropped:
		log.WithError(err).Warn("the pending CA is dropped: the next announcement starts over")
	case err != nil:
		log.WithError(err).Debug("the pending CA does not verify the server yet: both stay trusted")
	}
	configCA, err := localconfig.CA(ph.files, reg.CACert)
	if err != nil {
		log.WithError(err).Warn("the server's ca-cert is not taken: the config's CA is unreadable")
		return
	}
	out, err = t.Offer(reg.URL, sent, configCA, peer)
	switch {
	case errors.Is(err, catrust.ErrNotPinned):
		log.Debug(err)
	case out == catrust.Dropped:
		log.WithError(err).Warn("the pending CA is dropped: the next announcement starts over")
	case err != nil:
		log.WithError(err).Warn("the server's ca-cert is not taken")
	case out == catrust.Pending:
		log.Info("the server announced a new CA: kept as pending, both trusted until a handshake verified by it alone succeeds")
	case out == catrust.Replaced:
		log.Warn("the server, verified by the CA in force, announced another new CA: it replaces the pending one")
	}
}
