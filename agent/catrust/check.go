package catrust

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"

	"github.com/nodereg/nodereg/protocol"
)

// parseCAs checks announced PEM: bounded, certificates only, each a CA.
func parseCAs(b []byte) ([]*x509.Certificate, error) {
	if len(b) > MaxPEM {
		return nil, fmt.Errorf("%d bytes, more than %d", len(b), MaxPEM)
	}
	var certs []*x509.Certificate
	for rest := b; ; {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("a %s block, want certificates only", blk.Type)
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, err
		}
		if !c.IsCA {
			return nil, fmt.Errorf("%q is not a CA certificate", c.Subject.CommonName)
		}
		if certs = append(certs, c); len(certs) > maxCerts {
			return nil, fmt.Errorf("more than %d certificates", maxCerts)
		}
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in it")
	}
	return certs, nil
}

// canVerify refuses a CA that could not verify a certificate for host at
// now, so that nothing is kept pending that can never be proven
// (docs/ca-rotation.md, "What is refused").
func canVerify(c *x509.Certificate, host string, now time.Time) error {
	name := fmt.Sprintf("%q", c.Subject.CommonName)
	switch {
	case !c.BasicConstraintsValid || !c.IsCA:
		return fmt.Errorf("%s is not a CA certificate", name)
	case now.Before(c.NotBefore):
		return fmt.Errorf("%s is not valid before %s", name, c.NotBefore.UTC().Format(time.RFC3339))
	case now.After(c.NotAfter):
		return fmt.Errorf("%s expired on %s", name, c.NotAfter.UTC().Format(time.RFC3339))
	case c.KeyUsage != 0 && c.KeyUsage&x509.KeyUsageCertSign == 0:
		return fmt.Errorf("%s may not sign certificates (key usage)", name)
	case len(c.UnhandledCriticalExtensions) > 0:
		return fmt.Errorf("%s has a critical extension no verifier handles", name)
	}
	if !permits(c, host) {
		return fmt.Errorf("%s is name-constrained away from %s", name, host)
	}
	if !serverAuth(c) {
		return fmt.Errorf("%s may not vouch for servers (extended key usage without serverAuth)", name)
	}
	// What the checks above name, and what they do not (a key the
	// verifier cannot use, the rest of RFC 5280 as crypto/x509 reads it),
	// is settled by the verifier the dial uses.
	if err := probe(c, host, now); err != nil {
		return fmt.Errorf("%s cannot verify a server certificate for %s: %w", name, host, err)
	}
	return nil
}

// serverAuth: the CA's extended key usage, if it has one, lets its chains
// vouch for a server (x509 applies a CA's EKU to every certificate below
// it; an unknown usage alone allows nothing).
func serverAuth(c *x509.Certificate) bool {
	if len(c.ExtKeyUsage) == 0 && len(c.UnknownExtKeyUsage) == 0 {
		return true
	}
	for _, u := range c.ExtKeyUsage {
		if u == x509.ExtKeyUsageServerAuth || u == x509.ExtKeyUsageAny {
			return true
		}
	}
	return false
}

// probe verifies, with the options the dial verifies with
// (protocol.ServerVerifyOptions), a server certificate for host issued by
// a stand-in for c: c's subject, validity and every extension of it,
// critical or not, byte for byte (basic constraints, key usage, extended
// key usage, name constraints, policies...), under a key of our own, since
// c's is not ours. What the stand-in cannot carry, c's own key, is checked
// for a type and size the verifier takes.
func probe(c *x509.Certificate, host string, now time.Time) error {
	switch k := c.PublicKey.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < 1024 {
			return fmt.Errorf("its RSA key is %d bits, fewer than the verifier takes", k.N.BitLen())
		}
	case *ecdsa.PublicKey, ed25519.PublicKey:
	default:
		return fmt.Errorf("its key (%s) is of a kind the verifier does not take", c.PublicKeyAlgorithm)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	standIn := &x509.Certificate{SerialNumber: big.NewInt(1), RawSubject: c.RawSubject,
		NotBefore: c.NotBefore, NotAfter: c.NotAfter, ExtraExtensions: c.Extensions}
	der, err := x509.CreateCertificate(rand.Reader, standIn, standIn, key.Public(), key)
	if err != nil {
		return fmt.Errorf("its extensions cannot be carried: %w", err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		return fmt.Errorf("its extensions cannot be carried: %w", err)
	}
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(time.Minute),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	if ip := net.ParseIP(host); ip != nil {
		leaf.IPAddresses = []net.IP{ip}
	} else {
		leaf.DNSNames = []string{host}
	}
	if der, err = x509.CreateCertificate(rand.Reader, leaf, ca, key.Public(), key); err != nil {
		return err
	}
	if leaf, err = x509.ParseCertificate(der); err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	_, err = leaf.Verify(protocol.ServerVerifyOptions(roots, nil, host, now))
	return err
}

// permits is the CA's name constraints applied to the registration host,
// as a verifier applies them to a certificate naming it.
func permits(c *x509.Certificate, host string) bool {
	if ip := net.ParseIP(host); ip != nil {
		in := func(nets []*net.IPNet) bool {
			for _, n := range nets {
				if n.Contains(ip) {
					return true
				}
			}
			return false
		}
		return !in(c.ExcludedIPRanges) && (len(c.PermittedIPRanges) == 0 || in(c.PermittedIPRanges))
	}
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	in := func(domains []string) bool {
		for _, d := range domains {
			if domainMatch(h, strings.ToLower(d)) {
				return true
			}
		}
		return false
	}
	return !in(c.ExcludedDNSDomains) && (len(c.PermittedDNSDomains) == 0 || in(c.PermittedDNSDomains))
}

// domainMatch is RFC 5280's DNS constraint: "a.example" covers itself and
// its subdomains, ".a.example" its subdomains only, "" everything.
func domainMatch(host, constraint string) bool {
	if constraint == "" {
		return true
	}
	if strings.HasPrefix(constraint, ".") {
		return strings.HasSuffix(host, constraint)
	}
	return host == constraint || strings.HasSuffix(host, "."+constraint)
}

// verifiedBy: the chain a server presented (leaf first) verifies for host
// against the CAs of caPEM alone, no system pool.
func verifiedBy(caPEM []byte, peer []*x509.Certificate, host string, now time.Time) error {
	if len(peer) == 0 {
		return errors.New("the server presented no certificate")
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return errors.New("the CA in force holds no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range peer[1:] {
		inter.AddCert(c)
	}
	_, err := peer[0].Verify(protocol.ServerVerifyOptions(roots, inter, host, now))
	return err
}

// sameCerts: every certificate of certs is in the PEM text have.
func sameCerts(certs []*x509.Certificate, have []byte) bool {
	if have == nil {
		return false
	}
	var got []*x509.Certificate
	for rest := have; ; {
		var blk *pem.Block
		if blk, rest = pem.Decode(rest); blk == nil {
			break
		}
		if c, err := x509.ParseCertificate(blk.Bytes); err == nil {
			got = append(got, c)
		}
	}
	for _, d := range certs {
		found := false
		for _, g := range got {
			found = found || d.Equal(g)
		}
		if !found {
			return false
		}
	}
	return true
}
