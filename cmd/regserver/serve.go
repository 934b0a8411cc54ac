package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	stdlog "log"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/atomicfile"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/server"
	"github.com/nodereg/nodereg/server/regconfig"
	"github.com/nodereg/nodereg/server/store"
	"github.com/nodereg/nodereg/server/tpmauth"
)

// exitError is a start-up failure and the exit status it ends with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

func configErr(format string, a ...any) error {
	return &exitError{exitConfig, fmt.Errorf(format, a...)}
}

func failErr(format string, a ...any) error { return &exitError{exitFail, fmt.Errorf(format, a...)} }

// serve runs the server until ctx ends and returns the exit status.
func serve(ctx context.Context, f *flags, stdout, stderr io.Writer) int {
	logger := logrus.New()
	logger.SetOutput(stderr)
	if f.debug {
		logger.SetLevel(logrus.DebugLevel)
	}
	log := logrus.NewEntry(logger)
	code, err := serveWith(ctx, f, stdout, log)
	if err != nil {
		log.Error(err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return exitFail
	}
	return code
}

// serveWith is serve once the logger exists.
func serveWith(ctx context.Context, f *flags, stdout io.Writer, log *logrus.Entry) (int, error) {
	cfg, err := regconfig.Load(f.config)
	if err != nil {
		return 0, configErr("loading config: %v", err)
	}
	var tlsConfig *tls.Config
	if f.tlsCert != "" {
		if tlsConfig, err = loadTLS(f.tlsCert, f.tlsKey, time.Now()); err != nil {
			return 0, configErr("%v", err)
		}
	}
	st, err := openStore(f.store, f.acceptOlderTx, log)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	opts, err := serverOptions(f, cfg, st, log)
	if err != nil {
		return 0, err
	}
	srv, err := server.New(opts)
	if err != nil {
		return 0, failErr("starting: %v", err)
	}
	l, err := listen(f, srv, tlsConfig, log)
	if err != nil {
		return 0, err
	}
	// Parseable lines on stdout, so scripts can use port 0.
	fmt.Fprintf(stdout, "listening on %s\n", l.url)
	fields := logrus.Fields{"address": l.url, "store": f.store, "registrations": len(cfg.Registrations), "pools": len(cfg.Pools)}
	if l.adminURL != "" {
		fmt.Fprintf(stdout, "admin listening on %s\n", l.adminURL)
		fields["admin"] = l.adminURL
		if l.tokenFile != "" {
			fmt.Fprintf(stdout, "admin token in %s\n", l.tokenFile)
			fields["adminToken"] = l.tokenFile
		}
	}
	log.WithFields(fields).Info("regserver started")
	return l.run(ctx, srv, log), nil
}

// openStore opens --store, refusing a damaged file with what to do.
func openStore(path string, acceptOlder bool, log *logrus.Entry) (*store.Store, error) {
	if path == "" {
		log.Warn("no --store: inventories and claims are lost on exit")
	} else if err := checkStorePath(path); err != nil {
		return nil, configErr("%v", err)
	}
	st, err := store.OpenWith(path, store.Options{AcceptOlderTransaction: acceptOlder})
	if errors.Is(err, store.ErrDamaged) {
		return nil, configErr("opening store: %v. regserver does not serve from a damaged store (--accept-older-transaction serves one whose newest meta page alone is damaged, losing that transaction): restore %s from a backup, or save what it still holds with `regserver store export --store %s > state.json`, move the damaged file aside and start with --store state.json (a JSON store is imported)", err, path, path)
	}
	if err != nil {
		return nil, configErr("opening store: %v", err)
	}
	if st.Imported != "" {
		log.WithField("kept", st.Imported).Warnf("imported the JSON store %s into a bbolt database at the same path; the JSON file is kept aside", path)
	}
	if st.MetaWarning != "" {
		log.Warnf("store %s: %s", path, st.MetaWarning)
	}
	if st.CheckPartial {
		log.Warnf("store %s: the consistency check at start ran out of time and read part of the file", path)
	}
	return st, nil
}

// serverOptions turns the flags into server.Options.
func serverOptions(f *flags, cfg *regconfig.Config, st *store.Store, log *logrus.Entry) (server.Options, error) {
	// A flag's 0 means no limit; the option's 0 means the default.
	unlimited := func(v int) int {
		if v == 0 {
			return -1
		}
		return v
	}
	opts := server.Options{
		Config: cfg, Store: st, AllocationDelay: f.allocationDelay, UpdateConflict: f.updateConflict,
		NetworkWait: f.networkWait, ExternalURL: f.externalURL, Log: log,
		MaxSessions: f.maxSessions, MaxHardware: f.maxHardware,
		MaxClientSessions: unlimited(f.maxClientSessions), NewInventoriesPerMinute: unlimited(f.newInventoriesPerMin),
		MaxPendingInventories: unlimited(f.maxPendingInventories),
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
			return opts, configErr("--ca-cert: %v", err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(b) {
			return opts, configErr("--ca-cert %s: no PEM certificate found", caFile)
		}
		opts.CACert = string(b)
	}
	if f.noTPM {
		return opts, nil
	}
	to := tpmauth.Options{Log: log.WithField("auth", "tpm")}
	if f.tpmCA != "" {
		b, err := os.ReadFile(f.tpmCA)
		if err != nil {
			return opts, configErr("reading --tpm-ca: %v", err)
		}
		to.CAPool = x509.NewCertPool()
		if !to.CAPool.AppendCertsFromPEM(b) {
			return opts, configErr("--tpm-ca %s: no PEM certificate found", f.tpmCA)
		}
	}
	// TPM first, then PLAIN, as upstream tries them.
	opts.Auth = []protocol.ServerAuthenticator{tpmauth.New(to), protocol.PlainServer{}}
	return opts, nil
}

// adminOptions is the admin API's token (docs/regserver.md, Admin API):
// read from --admin-token-file, else generated into a 0600 file whose path
// is returned; none only with --admin-insecure.
func adminOptions(f *flags, log *logrus.Entry) (server.AdminOptions, string, error) {
	switch {
	case f.adminInsecure:
		log.Warn("--admin-insecure: the admin API takes requests without a token; anyone who reaches it (on loopback: any local user) can delete inventories and so take their addresses")
		return server.AdminOptions{Insecure: true}, "", nil
	case f.adminTokenFile != "":
		tok, err := readToken(f.adminTokenFile)
		if err != nil {
			return server.AdminOptions{}, "", err
		}
		return server.AdminOptions{Token: tok}, "", nil
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return server.AdminOptions{}, "", failErr("generating the admin token: %v", err)
	}
	tok := hex.EncodeToString(raw[:])
	path, err := tokenPath(f.store)
	if err != nil {
		return server.AdminOptions{}, "", failErr("admin token file: %v", err)
	}
	if err := atomicfile.Write(path, []byte(tok+"\n"), 0o600); err != nil {
		return server.AdminOptions{}, "", failErr("writing the admin token: %v", err)
	}
	return server.AdminOptions{Token: tok}, path, nil
}

// tokenPath is where a generated admin token goes: beside the store, else
// a new file in the temporary directory.
func tokenPath(storePath string) (string, error) {
	if storePath != "" {
		return storePath + ".admin-token", nil
	}
	f, err := os.CreateTemp("", "regserver-admin-token-*")
	if err != nil {
		return "", err
	}
	f.Close()
	return f.Name(), nil
}

// listeners are the bound listeners and their servers.
type listeners struct {
	servers   []*http.Server
	lns       []net.Listener
	url       string
	adminURL  string
	tokenFile string
}

// listen binds --listen and --admin-listen.
func listen(f *flags, srv *server.Server, tlsConfig *tls.Config, log *logrus.Entry) (*listeners, error) {
	maxConns := fitToFileLimit(f.maxConnections, log)
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, failErr("listening on %s: %v", f.listen, err)
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
	l := &listeners{servers: []*http.Server{hs}, lns: []net.Listener{ln}, url: scheme + "://" + ln.Addr().String()}
	if f.adminListen == "" {
		return l, nil
	}
	ao, tokenFile, err := adminOptions(f, log)
	if err != nil {
		ln.Close()
		return nil, err
	}
	addr := adminAddress(f.adminListen)
	aln, err := net.Listen("tcp", addr)
	if err != nil {
		ln.Close()
		return nil, failErr("--admin-listen %s: %v", addr, err)
	}
	aln = server.LimitListener(aln, adminMaxConnections, 0)
	if tlsConfig != nil {
		aln = tls.NewListener(aln, tlsConfig)
	}
	warnExposedAdmin(aln.Addr().(*net.TCPAddr).IP, addr, ao.Insecure, tlsConfig != nil, log)
	ahs := &http.Server{Handler: srv.Admin(ao), ReadHeaderTimeout: f.readHeaderTimeout,
		IdleTimeout: f.idleTimeout, MaxHeaderBytes: maxHeaderBytes, ErrorLog: hs.ErrorLog}
	l.servers = append(l.servers, ahs)
	l.lns = append(l.lns, aln)
	l.adminURL, l.tokenFile = scheme+"://"+aln.Addr().String(), tokenFile
	return l, nil
}

// run serves until ctx ends, then stops gracefully.
func (l *listeners) run(ctx context.Context, srv *server.Server, log *logrus.Entry) int {
	errc := make(chan error, len(l.servers))
	for i := range l.servers {
		go func() { errc <- l.servers[i].Serve(l.lns[i]) }()
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
	for _, h := range l.servers {
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
