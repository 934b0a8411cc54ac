package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// fitToFileLimit keeps the connection limit below the file descriptor
// limit (raised to its hard value first), leaving room for the store, the
// admin listener and logs; running out of descriptors is what stopped the
// admin API under 5,000 idle connections (docs/regserver.md).
func fitToFileLimit(maxConns int, log *logrus.Entry) int {
	const reserve = adminMaxConnections + 64
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return maxConns
	}
	if l.Cur < uint64(maxConns+reserve) && l.Cur < l.Max {
		l.Cur = min(l.Max, uint64(maxConns+reserve))
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &l)
		_ = syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l)
	}
	if l.Cur < uint64(maxConns+reserve) {
		fit := max(int(l.Cur)-reserve, 1)
		log.Warnf("--max-connections %d lowered to %d: the file descriptor limit is %d", maxConns, fit, l.Cur)
		return fit
	}
	return maxConns
}

// loadTLS loads the key pair and refuses a certificate outside its
// validity period: clients would refuse it with a message far from here.
func loadTLS(certFile, keyFile string, now time.Time) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	leaf := cert.Leaf
	if leaf == nil {
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, fmt.Errorf("--tls-cert %s: %w", certFile, err)
		}
	}
	if now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
		state := "expired"
		if now.Before(leaf.NotBefore) {
			state = "not yet valid"
		}
		return nil, fmt.Errorf("--tls-cert %s: certificate %s: valid from %s to %s, now is %s", certFile, state,
			leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
