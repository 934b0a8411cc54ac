package agent

import (
	"crypto/x509"
	"errors"
	"io/fs"
	"strings"

	"github.com/sirupsen/logrus"
	"gopkg.in/yaml.v3"

	"github.com/nodereg/nodereg/apply"
	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/safefile"
	"github.com/nodereg/nodereg/protocol"
)

// Default paths, upstream's (PROTOCOL.md 8.1), so existing images and units
// keep working when the binary is swapped.
const (
	DefaultConfigPath   = "/oem/registration/config.yaml"
	DefaultStatePath    = "/oem/registration/state.yaml"
	DefaultLabelsFile   = "/etc/elemental/labels.yaml"
	InstallConfigPath   = "/run/initramfs/live/livecd-cloud-config.yaml"
	InstallStatePath    = "/tmp/registration/state.yaml"
	defaultEmulatedSeed = 1
	networkModeAuto     = "auto"
	networkModeEmbedded = "embedded"
	networkModeExplicit = "explicit"
	authTPM, authMAC    = "tpm", "mac"
	authSysUUID         = "sys-uuid"
	maxConfigFileBytes  = 1 << 20
)

// Overrides are registration settings given on the command line: they win
// over the config file, which wins over defaults (PROTOCOL.md 8.2).
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
// (--nmstate) when given, else the config file's (b, read from path)
// elemental.registration.nmstate, else auto. A bad value is a config error
// naming where it came from.
func nmstateChoice(path string, b []byte, flag *string) (apply.NmstateChoice, error) {
	var local localConfig
	if err := yaml.Unmarshal(b, &local); err != nil {
		return "", configErr("config file %s: %w", path, err)
	}
	nmstate := local.Elemental.Registration.Nmstate
	where := path + ": " + NmstateKey
	if flag != nil {
		nmstate, where = *flag, "--nmstate"
	}
	choice, err := apply.ParseNmstateChoice(nmstate)
	if err != nil {
		return "", configErr("%s: %w", where, err)
	}
	return choice, nil
}

// LoadConfig reads the elemental config file (a missing file is an error, as
// upstream) and applies the overrides. Errors name the file and the key.
func LoadConfig(path string, o Overrides) (*protocol.Config, error) {
	return ReadConfig("/", path, o, nil)
}

// ReadConfig is LoadConfig for a node under root: the file and every path
// named in it (ca-cert) are read under root. Keys the agent does not know
// are warned about on log (nil: not reported), with the closest known key.
// A CA that cannot be read or holds no certificate is a configuration
// error now, not a dial that fails on every retry.
func ReadConfig(root, path string, o Overrides, log *logrus.Entry) (*protocol.Config, error) {
	cfg, _, err := readConfig(root, path, o, log)
	return cfg, err
}

// readConfig is ReadConfig that also returns the nmstate choice: --nmstate,
// else the file's elemental.registration.nmstate, else auto.
func readConfig(root, path string, o Overrides, log *logrus.Entry) (*protocol.Config, apply.NmstateChoice, error) {
	cfg, choice, _, err := readConfigFile(root, path, o, log)
	return cfg, choice, err
}

// readConfigFile is readConfig that also returns the file's bytes, for the
// settings protocol.Config has no field for (the bootstrap network).
func readConfigFile(root, path string, o Overrides, log *logrus.Entry) (*protocol.Config, apply.NmstateChoice, []byte, error) {
	path = host.Root(root).Path(path)
	b, err := safefile.ReadFile(path, maxConfigFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", nil, configErr("config file %s does not exist", path)
	}
	if err != nil {
		return nil, "", nil, configErr("reading config file: %w", err)
	}
	cfg := &protocol.Config{}
	if err := yaml.Unmarshal(b, cfg); err != nil {
		return nil, "", nil, configErr("config file %s: %w", path, err)
	}
	if log != nil {
		for _, u := range unknownKeys(path, b) {
			log.WithField("file", u.File).WithField("key", u.Key).WithField("closest", u.Closest).Warn(u.String())
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
		r.Auth = authTPM
	}
	if r.EmulateTPM && r.EmulatedTPMSeed == 0 && o.EmulatedTPMSeed == nil {
		r.EmulatedTPMSeed = defaultEmulatedSeed
	}
	if r.NetworkConfig == "" {
		r.NetworkConfig = networkModeAuto
	}
	choice, err := nmstateChoice(path, b, o.Nmstate)
	if err != nil {
		return nil, "", nil, err
	}
	if err := validate(path, r); err != nil {
		return nil, "", nil, err
	}
	if err := checkCA(root, path, r.CACert, o.CACert != nil); err != nil {
		return nil, "", nil, err
	}
	return cfg, choice, b, nil
}

// caUnderRoot is a ca-cert value as a node under root reads it: a file it
// names is taken under root; PEM text (or nothing) stays as it is.
func caUnderRoot(root, caCert string) string {
	if caCert == "" || protocol.IsCAPEM(caCert) {
		return caCert
	}
	return host.Root(root).Path(caCert)
}

// checkCA loads the CA as the dial will, so a missing, unreadable or empty
// CA ends the run with a reason (exit 78) instead of failing every attempt.
func checkCA(root, path, caCert string, fromFlag bool) error {
	if caCert == "" {
		return nil
	}
	where := path + ": elemental.registration.ca-cert"
	if fromFlag {
		where = "--registration-ca-cert"
	}
	pemText, err := protocol.CAPEM(caUnderRoot(root, caCert))
	if err != nil {
		return configErr("%s: %w", where, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pemText) {
		return configErr("%s: no PEM certificate in it", where)
	}
	return nil
}

func set[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func validate(path string, r *protocol.Registration) error {
	if r.URL == "" {
		return configErr("%s: elemental.registration.url: registration URL is empty", path)
	}
	if _, err := protocol.WebSocketURL(r.URL); err != nil {
		return configErr("%s: elemental.registration.url: %w", path, err)
	}
	switch r.Auth {
	case authTPM, authMAC, authSysUUID:
	default:
		return configErr("%s: elemental.registration.auth: unsupported authentication: %s (want tpm, mac or sys-uuid)", path, r.Auth)
	}
	switch r.NetworkConfig {
	case networkModeAuto, networkModeEmbedded, networkModeExplicit:
	default:
		return configErr("%s: elemental.registration.network-config: %q is not auto, embedded or explicit", path, r.NetworkConfig)
	}
	if r.TPMDevice != "" && !strings.HasPrefix(r.TPMDevice, "/") && !strings.HasPrefix(r.TPMDevice, "unix://") {
		return configErr("%s: elemental.registration.tpm-device: %q is neither a device path nor unix:///socket", path, r.TPMDevice)
	}
	return nil
}
