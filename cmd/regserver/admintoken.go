package main

import (
	"fmt"
	"io"
	"net"
	"os"

	"github.com/sirupsen/logrus"
)

// maxTokenFile bounds --admin-token-file: a token is a line.
const maxTokenFile = 4 << 10

// readTokenFile reads --admin-token-file, refusing one that others than its
// owner may read (docs/regserver.md, Admin API): a token group or world can
// read is a token any local user can use to delete inventories.
func readTokenFile(path string) ([]byte, error) {
	// A FIFO would block the open: only a regular file is opened.
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, configErr("--admin-token-file %s: not a regular file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, configErr("--admin-token-file: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, configErr("--admin-token-file: %v", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, configErr("--admin-token-file %s: mode %04o lets other users read the admin token; make it 0600 (chmod 600 %s)", path, perm, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return nil, configErr("--admin-token-file: %v", err)
	}
	if len(b) > maxTokenFile {
		return nil, configErr("--admin-token-file %s: more than %d bytes, not a token", path, maxTokenFile)
	}
	return b, nil
}

// warnExposedAdmin says, at start, what an admin listener beyond loopback
// exposes: without TLS its bearer token crosses the network in clear text,
// and with --admin-insecure it takes requests from anyone reaching it.
func warnExposedAdmin(ip net.IP, addr string, insecure, tls bool, log *logrus.Entry) {
	if ip.IsLoopback() {
		return
	}
	switch {
	case insecure:
		log.Warnf("--admin-listen %s is not loopback and --admin-insecure is set: anyone reaching it can delete inventories", addr)
	case !tls:
		log.Warn(fmt.Sprintf("--admin-listen %s is not loopback and serves plain http: the admin token crosses the network in clear text, and anyone who sees it can delete inventories; serve https (--tls-cert, --tls-key) or bind loopback", addr))
	}
}
