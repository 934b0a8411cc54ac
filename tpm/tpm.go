package tpm

import (
	"bytes"
	"context"
	"crypto/rsa"
	"crypto/x509"
	"errors"
	"fmt"
	"math/big"
	"sync"
	"time"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"
	"github.com/sirupsen/logrus"

	"github.com/nodereg/nodereg/internal/host"
	"github.com/nodereg/nodereg/internal/logx"
	"github.com/nodereg/nodereg/protocol"
	"github.com/nodereg/nodereg/tpm/wire"
)

// Options say which TPM to open and what the previous run left.
type Options struct {
	// Device is "" for /dev/tpmrm0 then /dev/tpm0, a device path, or
	// "unix:///path" for swtpm's data socket.
	Device string
	// Emulate selects the in-process emulated TPM (build tag emulatedtpm)
	// with Seed, already resolved by ResolveSeed.
	Emulate bool
	Seed    int64
	// AKBlob is the cached AK from the state file (opaque), may be nil.
	AKBlob []byte
	Log    *logrus.Entry
	// Files is the host edge the device or socket is opened through
	// (OpenDevice, Stat; its Path names them): required unless Emulate.
	// The agent hands it the machine's devices, whatever --root says;
	// tests a temp dir.
	Files host.FS
	// CommandTimeout bounds one command on a swtpm socket; 0 means 60 s.
	CommandTimeout time.Duration
	// NoPersist leaves the TPM's non-volatile memory as it is: no key is
	// made persistent (EvictControl), keys already persistent are still
	// used. A dry run, and a run under a scratch root, must not change the
	// machine's TPM (docs/architecture.md, "Where side effects live").
	NoPersist bool
}

// object is a loaded or persistent key and its Name, which go-tpm needs for
// every handle of a command that carries a session.
type object struct {
	handle    tpm2.TPMHandle
	name      tpm2.TPM2BName
	public    *tpm2.TPMTPublic
	transient bool // ours to flush
}

// TPM is one open TPM for the whole run. Its methods are safe for concurrent
// use but run one TPM command sequence at a time.
type TPM struct {
	mu       sync.Mutex
	tr       transport.TPMCloser
	counter  *Counter
	where    string
	emulated bool
	// persist: make SRK and EK persistent like upstream does. Pointless on
	// the emulator, which is manufactured afresh at every open.
	persist bool
	// noPersist: Options.NoPersist, persistent keys are read, never made.
	noPersist bool
	log       *logrus.Entry
	cached    *akBlob
	closed    bool

	ekPub  *rsa.PublicKey
	ekCert []byte // DER; nil when the EK travels as PUBLIC KEY
	ekHash string
	ek     *object // nil until needed for activation when the EK came from a certificate

	// srkName is the Name of the SRK persistent at 0x81000001, once read
	// or persisted this run (kept in the AK blob).
	srkName  []byte
	ak       *object
	akParams *wire.AttestationParameters
	akBlob   []byte
	token    string
}

// Open opens the TPM once for the whole run. Nothing is sent to the TPM yet.
func Open(opts Options) (*TPM, error) {
	log := logx.OrDiscard(opts.Log)
	tr, where, err := openTransport(opts)
	if err != nil {
		return nil, fmt.Errorf("opening TPM: %w", err)
	}
	t := &TPM{
		tr:        tr,
		counter:   &Counter{Next: tr},
		where:     where,
		emulated:  opts.Emulate,
		persist:   !opts.Emulate,
		noPersist: opts.NoPersist,
		log:       log.WithField("tpm", where),
	}
	if len(opts.AKBlob) > 0 {
		b, err := decodeAKBlob(opts.AKBlob)
		if err != nil {
			t.log.WithError(err).Warn("ignoring the cached AK: a new one will be created")
		} else {
			t.cached = b
		}
	}
	t.log.Debug("TPM opened")
	return t, nil
}

// Counts reports the TPM commands this TPM has sent so far.
func (t *TPM) Counts() Counts { return t.counter.Counts() }

// Close flushes what this run loaded and closes the transport.
func (t *TPM) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil
	}
	t.closed = true
	for _, o := range []*object{t.ak, t.ek} {
		t.flush(o)
	}
	t.ak, t.ek = nil, nil
	if err := t.tr.Close(); err != nil {
		return fmt.Errorf("closing TPM %s: %w", t.where, err)
	}
	return nil
}

func (t *TPM) flush(o *object) {
	if o == nil || !o.transient {
		return
	}
	if _, err := (tpm2.FlushContext{FlushHandle: o.handle}).Execute(t.counter); err != nil {
		t.log.WithError(err).Warnf("flushing transient object 0x%08x", uint32(o.handle))
	}
	o.transient = false
}

func (t *TPM) usable() error {
	if t.closed {
		return errors.New("TPM already closed")
	}
	return nil
}

// Hash returns the TPM hash: SHA-256 of the EK public key's PKIX DER, 64
// lower-case hex characters, the machine's identity.
func (t *TPM) Hash() (string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.usable(); err != nil {
		return "", err
	}
	if err := t.ensureEK(); err != nil {
		return "", err
	}
	return t.ekHash, nil
}

// AKBlob returns the AK to persist after Token: the reused blob or the new
// one. Nil before Token.
func (t *TPM) AKBlob() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.akBlob)
}

// Authenticator returns the protocol client side of this TPM.
func (t *TPM) Authenticator() protocol.Authenticator { return authenticator{t} }

// ensureEK selects the EK as go-attestation's EKs() does (docs/protocol.md §4.4): the RSA
// EK certificate in NV when it parses, else the key from the default
// template. A persistent EK whose key matches the one we derived on an
// earlier run stands in for the template derivation, sparing a key
// generation.
func (t *TPM) ensureEK() error {
	if t.ekPub != nil {
		return nil
	}
	cert, err := t.readEKCert()
	switch {
	case errors.Is(err, ErrBusy):
		return err
	case err != nil:
		t.log.WithError(err).Info("EK certificate unusable, using the EK from the default template")
	case cert != nil:
		pub, ok := cert.PublicKey.(*rsa.PublicKey)
		if !ok {
			t.log.Infof("EK certificate holds a %T key, using the EK from the default template", cert.PublicKey)
			break
		}
		t.ekPub, t.ekCert = pub, cert.Raw
	}
	if t.ekPub == nil && t.persist && t.cached != nil && t.cached.EKHash != "" {
		if o, pub, err := t.readPersistent(persistEK); err == nil {
			if h, _ := wire.PubHash(pub); h == t.cached.EKHash {
				t.ekPub, t.ek = pub, o
			}
		}
	}
	if t.ekPub == nil {
		o, pub, err := t.createEK()
		if err != nil {
			return err
		}
		t.ekPub, t.ek = pub, o
	}
	h, err := wire.PubHash(t.ekPub)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoEK, err)
	}
	t.ekHash = h
	t.log.WithField("tpmHash", h).WithField("ekCertificate", t.ekCert != nil).Debug("EK selected")
	return nil
}

// readEKCert returns nil, nil when the TPM has no RSA EK certificate.
func (t *TPM) readEKCert() (*x509.Certificate, error) {
	pubRsp, err := (tpm2.NVReadPublic{NVIndex: nvEKCertRSA}).Execute(t.counter)
	if err != nil {
		if errors.Is(classify(err), ErrBusy) {
			return nil, fmt.Errorf("reading EK certificate index: %w", classify(err))
		}
		return nil, nil
	}
	nvPub, err := pubRsp.NVPublic.Contents()
	if err != nil {
		return nil, fmt.Errorf("decoding EK certificate index public area: %w", err)
	}
	auth := tpm2.AuthHandle{Handle: nvEKCertRSA, Name: pubRsp.NVName, Auth: tpm2.PasswordAuth(nil)}
	// Read in chunks of nvChunk without asking the TPM its NV buffer size
	// first (the GetCapability upstream sends on every read): an EK
	// certificate of up to 1 KiB then costs one NV_Read. A TPM with a
	// smaller buffer refuses the read; then it is asked and the read
	// done again in its size.
	data, err := t.nvRead(nvEKCertRSA, pubRsp.NVName, auth, int(nvPub.DataSize), nvChunk)
	if err != nil && !errors.Is(err, ErrBusy) {
		if chunk := t.nvBufferMax(); chunk > 0 && chunk < nvChunk {
			data, err = t.nvRead(nvEKCertRSA, pubRsp.NVName, auth, int(nvPub.DataSize), chunk)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("reading EK certificate: %w", err)
	}
	return wire.ParseEKCertificate(data)
}

// nvChunk is the NV read size tried first: the TPM 2.0 reference
// implementation's MAX_NV_BUFFER_SIZE, which TPMs in the field meet or
// exceed.
const nvChunk = 1024

// nvBufferMax is the TPM's TPM_PT_NV_BUFFER_MAX, 0 when it does not say.
func (t *TPM) nvBufferMax() int {
	capRsp, err := (tpm2.GetCapability{
		Capability:    tpm2.TPMCapTPMProperties,
		Property:      uint32(tpm2.TPMPTNVBufferMax),
		PropertyCount: 1,
	}).Execute(t.counter)
	if err != nil {
		return 0
	}
	props, err := capRsp.CapabilityData.Data.TPMProperties()
	if err != nil || len(props.TPMProperty) == 0 || props.TPMProperty[0].Property != tpm2.TPMPTNVBufferMax {
		return 0
	}
	return int(props.TPMProperty[0].Value)
}

func (t *TPM) nvRead(idx tpm2.TPMHandle, name tpm2.TPM2BName, auth tpm2.AuthHandle, size, chunk int) ([]byte, error) {
	out := make([]byte, 0, size)
	for len(out) < size {
		n := min(chunk, size-len(out))
		rsp, err := (tpm2.NVRead{
			AuthHandle: auth,
			NVIndex:    tpm2.NamedHandle{Handle: idx, Name: name},
			Size:       uint16(n),
			Offset:     uint16(len(out)),
		}).Execute(t.counter)
		if err != nil {
			return nil, fmt.Errorf("NV_Read 0x%08x at %d: %w", uint32(idx), len(out), classify(err))
		}
		if len(rsp.Data.Buffer) == 0 {
			return nil, fmt.Errorf("NV_Read 0x%08x at %d: empty answer", uint32(idx), len(out))
		}
		out = append(out, rsp.Data.Buffer...)
	}
	return out, nil
}

// createEK derives the EK from the default template, with the nonce index
// when the manufacturer provisioned one, and keeps it loaded.
func (t *TPM) createEK() (*object, *rsa.PublicKey, error) {
	var nonce []byte
	if pubRsp, err := (tpm2.NVReadPublic{NVIndex: nvEKNonceRSA}).Execute(t.counter); err == nil {
		nvPub, err := pubRsp.NVPublic.Contents()
		if err == nil {
			// Only the first 256 bytes can reach the unique field.
			size := min(int(nvPub.DataSize), 256)
			nonce, err = t.nvRead(nvEKNonceRSA, pubRsp.NVName, tpm2.AuthHandle{
				Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil),
			}, size, size)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("%w: reading EK nonce index 0x%08x: %w", ErrNoEK, uint32(nvEKNonceRSA), err)
		}
	}
	rsp, err := (tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(ekTemplate(nonce)),
	}).Execute(t.counter)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: creating the EK in the endorsement hierarchy (is endorsement auth set?): %w", ErrNoEK, classify(err))
	}
	o := &object{handle: rsp.ObjectHandle, name: rsp.Name, transient: true}
	pub, err := rsp.OutPublic.Contents()
	if err == nil {
		o.public = pub
		var key *rsa.PublicKey
		if key, err = rsaKey(pub); err == nil {
			return o, key, nil
		}
	}
	t.flush(o)
	return nil, nil, fmt.Errorf("%w: decoding the created EK: %w", ErrNoEK, err)
}

// readPersistent returns the object at a persistent handle and its RSA key.
func (t *TPM) readPersistent(h tpm2.TPMHandle) (*object, *rsa.PublicKey, error) {
	rsp, err := (tpm2.ReadPublic{ObjectHandle: h}).Execute(t.counter)
	if err != nil {
		return nil, nil, classify(err)
	}
	pub, err := rsp.OutPublic.Contents()
	if err != nil {
		return nil, nil, fmt.Errorf("decoding public area of 0x%08x: %w", uint32(h), err)
	}
	o := &object{handle: h, name: rsp.Name, public: pub}
	key, err := rsaKey(pub)
	if err != nil {
		return o, nil, err
	}
	return o, key, nil
}

// rsaKey extracts the RSA public key of a TPMT_PUBLIC.
func rsaKey(pub *tpm2.TPMTPublic) (*rsa.PublicKey, error) {
	if pub.Type != tpm2.TPMAlgRSA {
		return nil, fmt.Errorf("key type 0x%04x is not RSA", uint16(pub.Type))
	}
	parms, err := pub.Parameters.RSADetail()
	if err != nil {
		return nil, fmt.Errorf("RSA parameters: %w", err)
	}
	mod, err := pub.Unique.RSA()
	if err != nil {
		return nil, fmt.Errorf("RSA modulus: %w", err)
	}
	e := int(parms.Exponent)
	if e == 0 {
		e = 65537
	}
	return &rsa.PublicKey{N: new(big.Int).SetBytes(mod.Buffer), E: e}, nil
}

// persistBestEffort makes a transient object persistent. Failure (owner
// auth set, NV full) costs only speed on later runs, so it is logged. It is
// the only command that writes the TPM's NV; with Options.NoPersist it is
// skipped and the transient key serves this run.
func (t *TPM) persistBestEffort(o *object, at tpm2.TPMHandle, what string) bool {
	if t.noPersist {
		t.log.Debugf("not making the %s persistent at 0x%08x (no changes to the TPM in this run)", what, uint32(at))
		return false
	}
	_, err := (tpm2.EvictControl{
		Auth:             tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		ObjectHandle:     tpm2.NamedHandle{Handle: o.handle, Name: o.name},
		PersistentHandle: at,
	}).Execute(t.counter)
	if err != nil {
		t.log.WithError(err).Warnf("could not make the %s persistent at 0x%08x (owner auth set?); continuing with a transient key", what, uint32(at))
		return false
	}
	t.log.Debugf("%s persisted at 0x%08x", what, uint32(at))
	return true
}

func checkCtx(ctx context.Context) error {
	if ctx == nil {
		return nil
	}
	return ctx.Err()
}
