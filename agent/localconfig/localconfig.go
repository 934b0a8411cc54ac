// Package localconfig is the node's own config file (upstream's
// /oem/registration/config.yaml): read and decoded once per run, with the
// command line's overrides on top, and the policy that keeps what is local
// local when a server's reply is decoded onto it (KeepLocal). The server is
// untrusted (docs/architecture.md): only this package and the command line
// decide paths, devices and nodereg's own settings.
package localconfig

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"strings"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/bootstrap"
	"github.com/nodereg/nodereg/internal/errclass"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/netpolicy"
	"github.com/nodereg/nodereg/protocol"
)

// The config file's paths are host's (host.ConfigFile, upstream's:
// docs/protocol.md §8.1).
const (
	defaultEmulatedSeed = 1
	// The values of elemental.registration.network-config.
	NetworkAuto     = "auto"
	NetworkEmbedded = "embedded"
	NetworkExplicit = "explicit"
	// The values of elemental.registration.auth.
	AuthTPM, AuthMAC = "tpm", "mac"
	AuthSysUUID      = "sys-uuid"
	// MaxFileBytes bounds the config file.
	MaxFileBytes = 1 << 20
)

// Overrides are registration settings given on the command line: they win
// over the config file, which wins over defaults (docs/protocol.md §8.2).
type Overrides struct {
	URL             *string
	CACert          *string
	EmulateTPM      *bool
	EmulatedTPMSeed *int64
	NoSMBIOS        *bool
	Auth            *string
	NoToolkit       *bool
	TPMDevice       *string
	NetworkConfig   *string
	// Nmstate is --nmstate (apply.NmstateChoice), over the file's
	// elemental.registration.nmstate.
	Nmstate *string
}

// NmstateKey is nodereg's local key choosing what writes an nmstate
// config's keyfiles: auto, builtin or nmstatectl (apply.NmstateChoice).
// protocol.Config does not hold it, so no server reply decoded into one
// can set it: only the node's own file and command line do.
const NmstateKey = "elemental.registration.nmstate"

// localConfig are the config file's keys that only the node sets.
type localConfig struct {
	Elemental struct {
		Registration struct {
			Nmstate string `yaml:"nmstate"`
		} `yaml:"registration"`
	} `yaml:"elemental"`
}

// nmstateChoice is what writes an nmstate config's keyfiles: flag
// (--nmstate) when given, else the config file's (doc, read from path)
// elemental.registration.nmstate, else auto. A bad value is a config error
// naming where it came from.
func nmstateChoice(path string, doc *yaml.Node, flag *string) (apply.NmstateChoice, error) {
	var local localConfig
	if err := doc.Decode(&local); err != nil {
		return "", errclass.Configf("config file %s: %w", path, err)
	}
	nmstate := local.Elemental.Registration.Nmstate
	where := path + ": " + NmstateKey
	if flag != nil {
		nmstate, where = *flag, "--nmstate"
	}
	choice, err := apply.ParseNmstateChoice(nmstate)
	if err != nil {
		return "", errclass.Configf("%s: %w", where, err)
	}
	return choice, nil
}

// File is the config file as a run uses it: decoded once (Read), the
// overrides applied, validated. Its bootstrap block is decoded from the
// same parse when the run asks for it (Bootstrap).
type File struct {
	// Path is where the file is on this machine, for messages.
	Path   string
	Config *protocol.Config
	// Nmstate is what writes an nmstate config's keyfiles: --nmstate,
	// else the file's elemental.registration.nmstate, else auto.
	Nmstate apply.NmstateChoice
	// DropIns are the drop-ins merged into the file, in order.
	DropIns []string
	doc     yaml.Node
	// unknown are the keys no part reads, of the file and each drop-in;
	// notes say which key the file and a drop-in both set; from is the
	// file each elemental.registration key came from.
	unknown []UnknownKey
	notes   []string
	from    map[string]string
}

// where is the file that set elemental.registration.key, for messages.
func (f *File) where(key string) string {
	if p, ok := f.from[key]; ok {
		return p
	}
	return f.Path
}

// Bootstrap returns the file's bootstrap settings (local only: never from
// a server reply), nil when it has none; a bad block is a *ConfigError of
// package bootstrap (exit 78).
func (f *File) Bootstrap() (*bootstrap.Config, error) { return bootstrap.FromConfigNode(&f.doc) }

// NetPolicy returns the file's network-config policy (netpolicy; local
// only, like the bootstrap block): the zero Policy when it has none, a
// configuration error (exit 78) when the key cannot be read.
func (f *File) NetPolicy() (netpolicy.Policy, error) {
	p, err := netpolicy.FromConfigNode(f.Path, &f.doc)
	if err != nil {
		return netpolicy.Policy{}, errclass.Configf("%w", err)
	}
	return p, nil
}

// Read reads the elemental config file of the node files reaches (its
// --root; a missing file is an error, as upstream) and applies the
// overrides; errors name the file and the key. The file and every path
// named in it (ca-cert) are read there. Keys the agent does not know are warned about
// on log (nil: not reported), with the closest known key. A CA that cannot
// be read or holds no certificate is a configuration error now, not a dial
// that fails on every retry.
func Read(files host.FS, path string, o Overrides, log *logrus.Entry) (*File, error) {
	f, err := parse(files, path, true)
	if err != nil {
		return nil, err
	}
	cfg := &protocol.Config{}
	if err := f.doc.Decode(cfg); err != nil {
		return nil, errclass.Configf("config file %s: %w", f.Path, err)
	}
	f.Config = cfg
	if log != nil {
		for _, u := range f.unknown {
			log.WithField("file", u.File).WithField("key", u.Key).WithField("closest", u.Closest).Warn(u.String())
		}
		for _, n := range f.notes {
			log.Warn(n)
		}
		if len(f.DropIns) > 0 {
			log.WithField("drop-ins", strings.Join(f.DropIns, " ")).Info("config: drop-ins merged into " + f.Path)
		}
	}
	r := &cfg.Elemental.Registration
	set(&r.URL, o.URL)
	set(&r.CACert, o.CACert)
	set(&r.EmulateTPM, o.EmulateTPM)
	set(&r.EmulatedTPMSeed, o.EmulatedTPMSeed)
	set(&r.NoSMBIOS, o.NoSMBIOS)
	set(&r.Auth, o.Auth)
	set(&r.NoToolkit, o.NoToolkit)
	set(&r.TPMDevice, o.TPMDevice)
	set(&r.NetworkConfig, o.NetworkConfig)
	if r.Auth == "" {
		r.Auth = AuthTPM
	}
	if r.EmulateTPM && r.EmulatedTPMSeed == 0 && o.EmulatedTPMSeed == nil {
		r.EmulatedTPMSeed = defaultEmulatedSeed
	}
	if r.NetworkConfig == "" {
		r.NetworkConfig = NetworkAuto
	}
	if f.Nmstate, err = nmstateChoice(f.Path, &f.doc, o.Nmstate); err != nil {
		return nil, err
	}
	if err := validate(f.where, r); err != nil {
		return nil, err
	}
	if err := checkCA(files, f.where("ca-cert"), r.CACert, o.CACert != nil); err != nil {
		return nil, err
	}
	return f, nil
}

// ReadBootstrap reads only what `agent render --bootstrap` needs of the
// file: its bootstrap block (an error when it has none) and the nmstate
// choice, with flag (--nmstate; nil when not given) over the file's.
func ReadBootstrap(files host.FS, path string, flag *string) (*bootstrap.Config, apply.NmstateChoice, error) {
	f, err := parse(files, path, false)
	if err != nil {
		return nil, "", err
	}
	if f.Nmstate, err = nmstateChoice(f.Path, &f.doc, flag); err != nil {
		return nil, "", err
	}
	c, err := f.Bootstrap()
	if err != nil {
		return nil, "", err
	}
	if c == nil {
		return nil, "", errclass.Configf("%s: no %s in it", f.Path, bootstrap.Key)
	}
	return c, f.Nmstate, nil
}

// parse reads the file at path in files and parses its YAML, once; a
// missing file is said as such when sayMissing.
func parse(files host.FS, path string, sayMissing bool) (*File, error) {
	f := &File{Path: files.Path(path)}
	b, err := files.ReadFile(path, MaxFileBytes)
	if sayMissing && errors.Is(err, fs.ErrNotExist) {
		return nil, errclass.Configf("config file %s does not exist", f.Path)
	}
	if err != nil {
		return nil, errclass.Configf("reading config file: %w", err)
	}
	// The file decides the server the node trusts, as a drop-in does: one
	// another user may write is refused as theirs is. ReadFile follows no
	// link, so the file judged is the file read.
	fi, err := files.Lstat(path)
	if err != nil {
		return nil, errclass.Configf("config file %s: %w", f.Path, err)
	}
	if err := trusted(files, path, fi, "config file"); err != nil {
		return nil, err
	}
	// One budget for the file and its drop-ins, merged into one config:
	// each document under it, and hundreds of drop-ins no more than one.
	var budget protocol.YAMLBudget
	doc, err := budget.Parse(b)
	if err != nil {
		return nil, errclass.Configf("config file %s: %w", f.Path, err)
	}
	f.doc = *doc
	f.unknown = unknownKeys(f.Path, &f.doc)
	ins, err := readDropIns(files, path, &budget)
	if err != nil {
		return nil, err
	}
	for i := range ins {
		f.unknown = append(f.unknown, unknownKeys(ins[i].Path, &ins[i].doc)...)
		f.DropIns = append(f.DropIns, ins[i].Path)
	}
	if f.notes, f.from, err = mergeDropIns(f.Path, &f.doc, ins); err != nil {
		return nil, err
	}
	return f, nil
}

// CA is the PEM text of a ca-cert value on the node files reaches: a file
// it names is read there (protocol.CAPEM); PEM text (or nothing) stays as
// it is.
func CA(files host.FS, caCert string) (string, error) {
	if caCert == "" || protocol.IsCAPEM(caCert) {
		return caCert, nil
	}
	b, err := protocol.CAPEM(files, caCert)
	return string(b), err
}

// checkCA loads the CA as the dial will, so a missing, unreadable or empty
// CA ends the run with a reason (exit 78) instead of failing every attempt.
func checkCA(files host.FS, path, caCert string, fromFlag bool) error {
	if caCert == "" {
		return nil
	}
	where := path + ": elemental.registration.ca-cert"
	if fromFlag {
		where = "--registration-ca-cert"
	}
	pemText, err := protocol.CAPEM(files, caCert)
	if err != nil {
		return errclass.Configf("%s: %w", where, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pemText) {
		return errclass.Configf("%s: no PEM certificate in it", where)
	}
	return nil
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

// validate checks the registration's values; where names the file that
// set a key (the config file or a drop-in).
func validate(where func(key string) string, r *protocol.Registration) error {
	if r.URL == "" {
		return errclass.Configf("%s: elemental.registration.url: registration URL is empty", where("url"))
	}
	if _, err := protocol.WebSocketURL(r.URL); err != nil {
		return errclass.Configf("%s: elemental.registration.url: %w", where("url"), err)
	}
	switch r.Auth {
	case AuthTPM, AuthMAC, AuthSysUUID:
	default:
		return errclass.Configf("%s: elemental.registration.auth: unsupported authentication: %s (want tpm, mac or sys-uuid)", where("auth"), r.Auth)
	}
	switch r.NetworkConfig {
	case NetworkAuto, NetworkEmbedded, NetworkExplicit:
	default:
		return errclass.Configf("%s: elemental.registration.network-config: %q is not auto, embedded or explicit", where("network-config"), r.NetworkConfig)
	}
	if r.TPMDevice != "" && !strings.HasPrefix(r.TPMDevice, "/") && !strings.HasPrefix(r.TPMDevice, "unix://") {
		return errclass.Configf("%s: elemental.registration.tpm-device: %q is neither a device path nor unix:///socket", where("tpm-device"), r.TPMDevice)
	}
	return nil
}
