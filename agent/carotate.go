package agent

import (
	"context"
	"crypto/x509"
	"errors"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/agent/catrust"
	"github.com/nodereg/nodereg/agent/localconfig"
	"github.com/nodereg/nodereg/internal/host"
)

// trustedCA is the ca-cert a connection trusts: the config's, or during a
// CA rotation the CA in force and the pending one (docs/ca-rotation.md).
func (r *run) trustedCA(files host.FS) string {
	configCA := localconfig.CA(files, r.cfg.Elemental.Registration.CACert)
	ca, err := catrust.Trust{Files: files}.Bundle(configCA)
	if err != nil {
		r.log.WithError(err).Warn("rotated CA unreadable: trusting the config's ca-cert only")
	}
	return ca
}

// rotateCA proves or drops a CA kept pending by an earlier run, then
// decides on the CA the server announced (sent: its reply's ca-cert) over
// the conversation that just succeeded, whose server presented peer.
// A dry run writes nothing, so it rotates nothing.
func (r *run) rotateCA(ctx context.Context, log *logrus.Entry, sent string, peer []*x509.Certificate) {
	if r.o.DryRun {
		return
	}
	t := catrust.Trust{Files: r.files}
	reg := r.cfg.Elemental.Registration
	out, err := t.Promote(ctx, reg.URL)
	switch {
	case out == catrust.Promoted:
		log.Info("the new CA verified the server on its own: it is now the only one trusted, the old one is dropped")
	case out == catrust.Dropped:
		log.WithError(err).Warn("the pending CA is dropped: the next announcement starts over")
	case err != nil:
		log.WithError(err).Debug("the pending CA does not verify the server yet: both stay trusted")
	}
	out, err = t.Offer(reg.URL, sent, localconfig.CA(r.files, reg.CACert), peer)
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
