package main

import (
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/sirupsen/logrus"
)

// maxTokenFile bounds --admin-token-file: a token is a line.
const maxTokenFile = 4 << 10

// minTokenBits is the least strength of an admin token: 128 bits are out
// of reach of guessing over the network (a generated token has 256).
const minTokenBits = 128

// readToken reads --admin-token-file and returns its token
// (docs/regserver.md, Admin API). Refused: a file another uid owns (that
// user could rewrite the token and own the admin API from the next start),
// one others than its owner may read (a token any local user can use to
// delete inventories), and content that is not one token of at least
// minTokenBits (tokenError).
func readToken(path string) (string, error) {
	b, err := readTokenFile(path)
	if err != nil {
		return "", err
	}
	// One final newline, as an editor or echo leaves it, is not the token.
	tok := strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	if cause := tokenError(tok); cause != "" {
		return "", configErr("--admin-token-file %s: %s", path, cause)
	}
	return tok, nil
}

// tokenError says why tok is not an admin token, or "". A token is one
// line of the characters an Authorization: Bearer header carries (RFC
// 6750's b64token), so every byte of it can match a header; its strength
// is counted as if each character were drawn at random from the smallest
// usual alphabet holding them all: decimal digits (3.3 bits each), hex
// digits (4), else base64 (6). So 128 bits is 39 digits, 32 hex or 22
// base64 characters; a wider alphabet is still counted as base64, which
// errs on the side of a longer token.
func tokenError(tok string) string {
	if tok == "" {
		return "empty"
	}
	if strings.ContainsAny(tok, "\r\n") {
		return "more than one line; a token is one line, and a header can never match a token of two"
	}
	digits, hex := true, true
	for i, c := range tok {
		isDigit := c >= '0' && c <= '9'
		isHex := isDigit || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
		b64 := isDigit || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || strings.ContainsRune("-._~+/", c) || c == '=' && strings.Trim(tok[i:], "=") == ""
		if !b64 {
			return fmt.Sprintf("character %d is %q, which a bearer token cannot hold (letters, digits, - . _ ~ + /, and = at the end)", i+1, c)
		}
		digits, hex = digits && isDigit, hex && isHex
	}
	perChar := 6.0
	switch {
	case digits:
		perChar = math.Log2(10)
	case hex:
		perChar = 4
	}
	if bits := float64(len(strings.TrimRight(tok, "="))) * perChar; bits < minTokenBits {
		need := int(math.Ceil(minTokenBits / perChar))
		return fmt.Sprintf("a %d-character token is %.0f bits at most, fewer than %d: use at least %d random characters of that alphabet (e.g. openssl rand -hex 16)", len(tok), bits, minTokenBits, need)
	}
	return ""
}

// readTokenFile reads --admin-token-file, refusing one that another uid
// owns or that others than its owner may read (readToken).
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
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, configErr("--admin-token-file %s: owned by uid %d, not by uid %d that regserver runs as: that user could rewrite the admin token; make it regserver's (chown %d %s)", path, st.Uid, os.Geteuid(), os.Geteuid(), path)
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
