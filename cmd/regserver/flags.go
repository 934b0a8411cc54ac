package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
)

type flags struct {
	config          string
	listen          string
	store           string
	acceptOlderTx   bool
	allocationDelay time.Duration
	updateConflict  float64
	networkWait     time.Duration
	tlsCert         string
	tlsKey          string
	caCert          string
	tpmCA           string
	externalURL     string
	noTPM           bool
	debug           bool
	showVersion     bool

	maxSessions       int
	maxSessionBytes   int64
	maxHardware       int
	maxConnections    int
	readHeaderTimeout time.Duration
	idleTimeout       time.Duration
	adminListen       string
	adminTokenFile    string
	adminInsecure     bool

	maxClientSessions     int
	newInventoriesPerMin  int
	maxPendingInventories int
}

// bind declares the server's flags; docs/regserver.md lists the same flags
// and defaults (checked by a test).
func (f *flags) bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVar(&f.config, "config", "", "config file (YAML): registrations and IP pools (required)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on; port 0 picks a free port (printed on stdout)")
	fs.StringVar(&f.store, "store", "", "bbolt database of inventories, address claims and hardware data, created when missing; empty keeps them in memory only")
	fs.BoolVar(&f.acceptOlderTx, "accept-older-transaction", false, "serve a store whose newest meta page is damaged from the older one, losing its last committed transaction (without it regserver refuses such a store)")
	fs.DurationVar(&f.allocationDelay, "allocation-delay", 0, "hold back each new claim's address this long (e.g. 3s)")
	fs.Float64Var(&f.updateConflict, "fault-update-conflict", 0, "a fault for tests: refuse the first registration of this fraction of machines (0 to 1) with elemental-operator's Kubernetes conflict text; each machine at most once")
	fs.DurationVar(&f.networkWait, "network-wait", server.DefaultNetworkWait, "how long MsgGet waits for pending addresses for clients that cannot ask explicitly (upstream elemental-register), within the session deadline; then the session ends with an error. 0 fails at once")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key serves https/wss")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&f.caCert, "ca-cert", "", "CA certificate (PEM file) sent to clients as registration.ca-cert; defaults to --tls-cert")
	fs.StringVar(&f.tpmCA, "tpm-ca", "", "PEM bundle of EK certificate authorities; when set only EKs chaining to it are accepted")
	fs.StringVar(&f.externalURL, "external-url", "", "scheme://host[:port] clients reach this server at; default: taken from each request")
	fs.BoolVar(&f.noTPM, "no-tpm", false, "accept PLAIN authentication only")
	fs.StringVar(&f.adminListen, "admin-listen", "", "address of the admin API's own listener; a bare :PORT binds loopback; empty: no admin API")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "file holding the bearer token the admin API requires (Authorization: Bearer TOKEN); without it one is generated at start into a 0600 file whose path is printed")
	fs.BoolVar(&f.adminInsecure, "admin-insecure", false, "serve the admin API without a token (a warning at start says so)")
	fs.IntVar(&f.maxSessions, "max-sessions", server.DefaultMaxSessions, "registration sessions in flight, server-wide; more wait up to 5 s for a slot, then get HTTP 503")
	fs.Int64Var(&f.maxSessionBytes, "max-session-bytes", defaultMaxSessionBytes, "bytes one connection (one registration session) may send, headers included")
	fs.IntVar(&f.maxClientSessions, "max-client-sessions", server.DefaultMaxClientSessions, "registration sessions in flight from one client address; more get HTTP 429. 0: no limit")
	fs.IntVar(&f.newInventoriesPerMin, "new-inventories-per-minute", server.DefaultNewInventoriesPerMinute, "new inventories one client address may create on one registration per minute; more get MsgError RateLimited. 0: no limit")
	fs.IntVar(&f.maxPendingInventories, "max-pending-inventories", server.DefaultMaxPendingInventories, "inventories waiting for an address, server-wide; a new machine that would wait gets MsgError TooManyPendingInventories. 0: no limit")
	fs.IntVar(&f.maxHardware, "max-hardware", server.DefaultMaxHardware, "bytes of hardware data (SMBIOS and system data, as stored) per inventory; a registration sending more fails with MsgError")
	fs.IntVar(&f.maxConnections, "max-connections", defaultMaxConnections, "connections open at once on --listen; more wait in the kernel's backlog")
	fs.DurationVar(&f.readHeaderTimeout, "read-header-timeout", defaultReadHeaderTimeout, "time a connection has to send its request headers")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", defaultIdleTimeout, "time an idle keep-alive connection stays open")
	fs.BoolVar(&f.debug, "debug", false, "debug logging")
	fs.BoolVar(&f.showVersion, "version", false, "print the version and exit")
}

// check validates the values; errors name the flag.
func (f *flags) check() error {
	if f.config == "" {
		return errors.New("--config is required: pass the YAML file of registrations and IP pools, for example --config cmd/regserver/example.yaml (docs/regserver.md)")
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return errors.New("--tls-cert and --tls-key go together")
	}
	if f.allocationDelay < 0 {
		return errors.New("--allocation-delay must not be negative")
	}
	if !(f.updateConflict >= 0 && f.updateConflict <= 1) { // NaN too
		return errors.New("--fault-update-conflict must be between 0 and 1 (a fraction of the machines)")
	}
	if f.networkWait < 0 {
		return errors.New("--network-wait must not be negative")
	}
	for name, v := range map[string]int64{"--max-sessions": int64(f.maxSessions), "--max-session-bytes": f.maxSessionBytes,
		"--max-hardware": int64(f.maxHardware), "--max-connections": int64(f.maxConnections),
		"--read-header-timeout": int64(f.readHeaderTimeout), "--idle-timeout": int64(f.idleTimeout)} {
		if v <= 0 {
			return fmt.Errorf("%s must be positive", name)
		}
	}
	if f.adminTokenFile != "" && f.adminListen == "" {
		return errors.New("--admin-token-file needs --admin-listen")
	}
	if f.adminTokenFile != "" && f.adminInsecure {
		return errors.New("--admin-token-file and --admin-insecure exclude each other")
	}
	for name, v := range map[string]int{"--max-client-sessions": f.maxClientSessions,
		"--new-inventories-per-minute": f.newInventoriesPerMin, "--max-pending-inventories": f.maxPendingInventories} {
		if v < 0 {
			return fmt.Errorf("%s must not be negative (0: no limit)", name)
		}
	}
	if f.externalURL != "" {
		if err := regconfig.CheckExternalURL(f.externalURL); err != nil {
			return fmt.Errorf("--external-url: %w", err)
		}
	}
	return nil
}

// checkStorePath fails unless the store's directory exists and takes a new
// file: finding out at the first registration makes every agent exit 78.
func checkStorePath(path string) error {
	dir := filepath.Dir(path)
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("--store %s: directory: %w", path, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("--store %s: %s is not a directory", path, dir)
	}
	probe, err := os.CreateTemp(dir, ".regserver-probe-*")
	if err != nil {
		return fmt.Errorf("--store %s: directory %s is not writable: %w", path, dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("--store %s: not a regular file", path)
	}
	return nil
}

// adminAddress binds a bare port (":9090" or "9090") to loopback: the
// admin API can delete inventories, so exposing it takes an explicit host.
func adminAddress(a string) string {
	if _, err := strconv.Atoi(a); err == nil {
		return net.JoinHostPort("127.0.0.1", a)
	}
	if host, port, err := net.SplitHostPort(a); err == nil && host == "" {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return a
}
