// Command regserver is the reference registration server: the elemental
// registration endpoint with file-backed inventories and IP pools, for
// labs, demos and tests. See docs/regserver.md.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	cmdline "github.com/nodereg/nodereg/internal/cli"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
	"github.com/nodereg/nodereg/server/tpmauth"
)

// Exit codes as the agent's: configuration errors are not worth a restart.
const (
	exitOK     = 0
	exitFail   = 1
	exitConfig = 78
)

// version is set by the Makefile with -ldflags.
var version = "0.1.0-dev"

// HTTP defaults; see docs/regserver.md.
const (
	defaultMaxSessionBytes   = 256 << 10
	defaultMaxConnections    = 4096
	defaultReadHeaderTimeout = 10 * time.Second
	defaultIdleTimeout       = 30 * time.Second
	// maxHeaderBytes fits a TPM token (an EK certificate and the AK, in
	// base64) many times over.
	maxHeaderBytes = 64 << 10
	// adminMaxConnections bounds the admin listener on its own, so the
	// registration listener's load never locks the admin out.
	adminMaxConnections = 64
)

type flags struct {
	config          string
	listen          string
	store           string
	allocationDelay time.Duration
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
}

// command is the whole command tree: the root serves, `store export`
// reads a store, and cobra's help and completion come with it.
func command(ctx context.Context, stdout, stderr io.Writer) *cobra.Command {
	f := &flags{}
	root := &cobra.Command{
		Use:   "regserver --config FILE [flags]",
		Short: "The reference elemental registration server, with file-backed inventories and IP pools",
		Long: `Serves the elemental registration endpoint (rancher/elemental-operator's
protocol) with inventories and address claims in a bbolt store and addresses
from the config file's IP pools: for labs, demos and tests. See
docs/regserver.md.

Prints "listening on URL" (and "admin listening on URL" with --admin-listen)
on stdout once it serves. SIGTERM or SIGINT stops it gracefully.

Exit status: 0 stopped, 64 bad command line, 78 configuration error (a flag
value, the config, the store, a certificate), 1 anything else.`,
		Args:          cmdline.NoArgs,
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE: func(*cobra.Command, []string) error {
			if f.showVersion {
				fmt.Fprintln(stdout, version)
				return nil
			}
			if err := f.check(); err != nil {
				fmt.Fprintln(stderr, "regserver:", err)
				return cmdline.Done(exitConfig)
			}
			return cmdline.Done(serve(ctx, f, stdout, stderr))
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	f.bind(root.Flags())
	root.SetHelpCommand(cmdline.HelpCommand())
	root.AddCommand(storeCommand(stdout, stderr), &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cmdline.NoArgs,
		Run:   func(*cobra.Command, []string) { fmt.Fprintln(stdout, version) },
	})
	return root
}

// bind declares the server's flags; docs/regserver.md lists the same flags
// and defaults (checked by a test).
func (f *flags) bind(fs *pflag.FlagSet) {
	fs.SortFlags = false
	fs.StringVar(&f.config, "config", "", "config file (YAML): registrations and IP pools (required)")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8080", "address to listen on; port 0 picks a free port (printed on stdout)")
	fs.StringVar(&f.store, "store", "", "bbolt database of inventories, address claims and hardware data, created when missing; empty keeps them in memory only")
	fs.DurationVar(&f.allocationDelay, "allocation-delay", 0, "hold back each new claim's address this long (e.g. 3s)")
	fs.DurationVar(&f.networkWait, "network-wait", server.DefaultNetworkWait, "how long MsgGet waits for pending addresses for clients that cannot ask explicitly (upstream elemental-register), within the session deadline; then the session ends with an error. 0 fails at once")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "TLS certificate (PEM); with --tls-key serves https/wss")
	fs.StringVar(&f.tlsKey, "tls-key", "", "TLS private key (PEM)")
	fs.StringVar(&f.caCert, "ca-cert", "", "CA certificate (PEM file) sent to clients as registration.ca-cert; defaults to --tls-cert")
	fs.StringVar(&f.tpmCA, "tpm-ca", "", "PEM bundle of EK certificate authorities; when set only EKs chaining to it are accepted")
	fs.StringVar(&f.externalURL, "external-url", "", "scheme://host[:port] clients reach this server at; default: taken from each request")
	fs.BoolVar(&f.noTPM, "no-tpm", false, "accept PLAIN authentication only")
	fs.StringVar(&f.adminListen, "admin-listen", "", "address of the admin API's own listener; a bare :PORT binds loopback; empty: no admin API")
	fs.StringVar(&f.adminTokenFile, "admin-token-file", "", "file holding a bearer token the admin API requires (Authorization: Bearer TOKEN)")
	fs.IntVar(&f.maxSessions, "max-sessions", server.DefaultMaxSessions, "registration sessions in flight, server-wide; more wait up to 5 s for a slot, then get HTTP 503")
	fs.Int64Var(&f.maxSessionBytes, "max-session-bytes", defaultMaxSessionBytes, "bytes one connection (one registration session) may send, headers included")
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

// fitToFileLimit keeps the connection limit below the file descriptor
// limit (raised to its hard value first), leaving room for the store, the
// admin listener and logs; running out of descriptors is what stopped the
// admin API in the issue.
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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cmdline.Execute(command(ctx, stdout, stderr), args, stderr)
}

// serve runs the server until ctx ends and returns the exit status.
func serve(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
	logger := logrus.New()
	logger.SetOutput(stderr)
	if f.debug {
		logger.SetLevel(logrus.DebugLevel)
	}
	log := logrus.NewEntry(logger)

	cfg, err := regconfig.Load(f.config)
	if err != nil {
		log.Errorf("loading config: %v", err)
		return exitConfig
	}
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		if tlsConfig, err = loadTLS(f.tlsCert, f.tlsKey, time.Now()); err != nil {
			log.Error(err)
			return exitConfig
		}
	}
	if f.store == "" {
		log.Warn("no --store: inventories and claims are lost on exit")
	} else if err := checkStorePath(f.store); err != nil {
		log.Error(err)
		return exitConfig
	}
	st, err := store.Open(f.store)
	if err != nil {
		log.Errorf("opening store: %v", err)
		return exitConfig
	}
	defer st.Close()
	if st.Imported != "" {
		log.WithField("kept", st.Imported).Warnf("imported the JSON store %s into a bbolt database at the same path; the JSON file is kept aside", f.store)
	}
	opts := server.Options{
		Config: cfg, Store: st, AllocationDelay: f.allocationDelay,
		NetworkWait: f.networkWait, ExternalURL: f.externalURL, Log: log,
		MaxSessions: f.maxSessions, MaxHardware: f.maxHardware,
	}
	if f.networkWait == 0 {
		opts.NetworkWait = -1
	}
	caFile := f.caCert
	if caFile == "" {
		caFile = f.tlsCert
	}
	if caFile != "" {
		b, err := os.ReadFile(caFile)
		if err != nil {
			log.Errorf("--ca-cert: %v", err)
			return exitConfig
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			log.Errorf("--ca-cert %s: no PEM certificate found", caFile)
			return exitConfig
		}
		opts.CACert = string(b)
	}
	if !f.noTPM {
		to := tpmauth.Options{Log: log.WithField("auth", "tpm")}
		if f.tpmCA != "" {
			b, err := os.ReadFile(f.tpmCA)
			if err != nil {
				log.Errorf("reading --tpm-ca: %v", err)
				return exitConfig
			}
			to.CAPool = x509.NewCertPool()
			if !to.CAPool.AppendCertsFromPEM(b) {
				log.Errorf("--tpm-ca %s: no PEM certificate found", f.tpmCA)
				return exitConfig
			}
		}
		// TPM first, then PLAIN, as upstream tries them.
		opts.Auth = []protocol.ServerAuthenticator{tpmauth.New(to), protocol.PlainServer{}}
	}
	srv, err := server.New(opts)
	if err != nil {
		log.Errorf("starting: %v", err)
		return exitFail
	}

	var adminToken string
	if f.adminTokenFile != "" {
		b, err := os.ReadFile(f.adminTokenFile)
		if err != nil {
			log.Errorf("--admin-token-file: %v", err)
			return exitConfig
		}
		if adminToken = strings.TrimSpace(string(b)); adminToken == "" {
			log.Errorf("--admin-token-file %s: empty", f.adminTokenFile)
			return exitConfig
		}
	}
	maxConns := fitToFileLimit(f.maxConnections, log)

	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		log.Errorf("listening on %s: %v", f.listen, err)
		return exitFail
	}
	ln = server.LimitListener(ln, maxConns, f.maxSessionBytes)
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: f.readHeaderTimeout, IdleTimeout: f.idleTimeout,
		MaxHeaderBytes: maxHeaderBytes, ErrorLog: stdlog.New(log.WriterLevel(logrus.DebugLevel), "", 0)}
	scheme := "http"
	if tlsConfig != nil {
		hs.TLSConfig = tlsConfig
		ln = tls.NewListener(ln, hs.TLSConfig)
		scheme = "https"
	}
	servers := []*http.Server{hs}
	listeners := []net.Listener{ln}
	fields := logrus.Fields{"address": ln.Addr().String(), "store": f.store, "registrations": len(cfg.Registrations), "pools": len(cfg.Pools)}
	if f.adminListen != "" {
		addr := adminAddress(f.adminListen)
		aln, err := net.Listen("tcp", addr)
		if err != nil {
			ln.Close()
			log.Errorf("--admin-listen %s: %v", addr, err)
			return exitFail
		}
		aln = server.LimitListener(aln, adminMaxConnections, 0)
		if tlsConfig != nil {
			aln = tls.NewListener(aln, tlsConfig)
		}
		if ip := aln.Addr().(*net.TCPAddr).IP; !ip.IsLoopback() && adminToken == "" {
			log.Warnf("--admin-listen %s is not loopback and no --admin-token-file is set: anyone reaching it can delete inventories", addr)
		}
		ahs := &http.Server{Handler: srv.Admin(server.AdminOptions{Token: adminToken}), ReadHeaderTimeout: f.readHeaderTimeout,
			IdleTimeout: f.idleTimeout, MaxHeaderBytes: maxHeaderBytes, ErrorLog: hs.ErrorLog}
		servers = append(servers, ahs)
		listeners = append(listeners, aln)
		fields["admin"] = scheme + "://" + aln.Addr().String()
	}
	// One parseable line on stdout, so scripts can use port 0.
	fmt.Fprintf(stdout, "listening on %s://%s\n", scheme, ln.Addr())
	if len(servers) > 1 {
		fmt.Fprintf(stdout, "admin listening on %s\n", fields["admin"])
	}
	log.WithFields(fields).Info("regserver started")

	errc := make(chan error, len(servers))
	for i := range servers {
		go func() { errc <- servers[i].Serve(listeners[i]) }()
	}
	select {
	case err := <-errc:
		log.Errorf("serving: %v", err)
		return exitFail
	case <-ctx.Done():
	}
	// A registration fits in its 10 s session deadline; give it that long.
	sctx, cancel := context.WithTimeout(context.Background(), protocol.DefaultSessionDeadline)
	defer cancel()
	for _, h := range servers {
		if err := h.Shutdown(sctx); err != nil {
			log.Warnf("shutdown: %v", err)
		}
	}
	if err := srv.Wait(sctx); err != nil {
		log.Warnf("shutdown: %v", err)
	}
	log.Info("regserver stopped")
	return exitOK
}

// storeCommand is `regserver store export --store FILE`: the state as JSON
// on stdout, hardware data included, for humans and backups. Starting
// regserver on a file holding that JSON imports it.
func storeCommand(stdout, stderr io.Writer) *cobra.Command {
	storeCmd := &cobra.Command{
		Use:   "store",
		Short: "Read a store without serving it",
		Args:  cmdline.NoArgs,
		// Without a subcommand cobra would print help and exit 0: a
		// missing command is a bad command line.
		RunE: func(*cobra.Command, []string) error {
			return errors.New("a command is required: export")
		},
	}
	var path string
	export := &cobra.Command{
		Use:   "export --store FILE",
		Short: "Print a store's whole state as JSON on stdout",
		Long: `Prints the store's whole state (inventories, address claims, hardware data)
as JSON on stdout, for humans and backups; starting regserver with --store on a
file holding that JSON imports it. The store is opened read-only, and not
while a running regserver holds it.`,
		Args: cmdline.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			st, err := store.OpenReadOnly(path)
			if err != nil {
				fmt.Fprintln(stderr, "regserver:", err)
				return cmdline.Done(exitConfig)
			}
			defer st.Close()
			if err := st.Export(stdout); err != nil {
				fmt.Fprintln(stderr, "regserver: exporting:", err)
				return cmdline.Done(exitFail)
			}
			return nil
		},
	}
	export.Flags().StringVar(&path, "store", "", "the store file (required)")
	_ = export.MarkFlagRequired("store")
	storeCmd.AddCommand(export)
	return storeCmd
}
