package tpm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"

	"github.com/nodereg/nodereg/tpm/wire"
)

// akBlob is what the agent keeps in its state file between runs. Its
// attestation fields are resent as they are: the server accepts the same
// creation attestation again, and a Load costs no key generation.
type akBlob struct {
	Version           int    `json:"v"`
	Public            []byte `json:"public"`  // TPMT_PUBLIC
	Private           []byte `json:"private"` // TPM2B_PRIVATE contents
	CreateData        []byte `json:"createData"`
	CreateAttestation []byte `json:"createAttestation"`
	CreateSignature   []byte `json:"createSignature"`
	// EKHash is the TPM hash the EK had when this AK was made; a persistent
	// EK with the same hash then spares re-deriving it.
	EKHash string `json:"ekHash,omitempty"`
	// SRKName is the Name of the persistent SRK (0x81000001) this AK was
	// made under: with it a later run loads the AK without reading the
	// SRK first. A stale one costs a failed Load, then the SRK is read.
	SRKName []byte `json:"srkName,omitempty"`
}

const akBlobVersion = 1

func decodeAKBlob(b []byte) (*akBlob, error) {
	var a akBlob
	if err := json.Unmarshal(b, &a); err != nil {
		return nil, fmt.Errorf("decoding cached AK: %w", err)
	}
	if a.Version != akBlobVersion {
		return nil, fmt.Errorf("decoding cached AK: version %d, want %d", a.Version, akBlobVersion)
	}
	if len(a.Public) == 0 || len(a.Private) == 0 || len(a.CreateData) == 0 ||
		len(a.CreateAttestation) == 0 || len(a.CreateSignature) == 0 {
		return nil, errors.New("decoding cached AK: a field is empty")
	}
	return &a, nil
}

// ensureAK loads the cached AK or creates a new one, and builds the token.
func (t *TPM) ensureAK() error {
	if t.ak != nil {
		return nil
	}
	if err := t.ensureEK(); err != nil {
		return err
	}
	if c := t.cached; c != nil && len(c.SRKName) > 0 {
		// Password authorization does not bind the parent's Name, so a
		// wrong one cannot load the AK under another key: a different SRK
		// fails the Load (integrity), a missing one fails on the handle.
		srk := &object{handle: persistSRK, name: tpm2.TPM2BName{Buffer: c.SRKName}}
		t.srkName = c.SRKName
		err := t.loadAK(srk, c)
		if err == nil {
			t.log.Debug("cached AK loaded under the persistent SRK")
			return nil
		}
		if errors.Is(err, ErrBusy) {
			return err
		}
		t.log.WithError(err).Debug("the cached AK does not load under the SRK it was made under; reading the SRK")
		t.srkName = nil
	}
	srk, err := t.srk()
	if err != nil {
		return err
	}
	defer t.flush(srk)

	if t.cached != nil {
		if err := t.loadAK(srk, t.cached); err == nil {
			t.log.Debug("cached AK loaded")
			return nil
		} else if errors.Is(err, ErrBusy) {
			return err
		} else {
			t.log.WithError(err).Warn("the cached AK cannot be loaded by this TPM (its parent key changed or the TPM was cleared); creating a new AK")
			t.cached = nil
		}
	}
	return t.createAK(srk)
}

// srk returns the AK's parent as go-attestation picks it: whatever is at
// 0x81000001, else a new SRK from the default template, persisted there.
func (t *TPM) srk() (*object, error) {
	rsp, err := (tpm2.ReadPublic{ObjectHandle: persistSRK}).Execute(t.counter)
	if err == nil {
		t.srkName = rsp.Name.Buffer
		return &object{handle: persistSRK, name: rsp.Name}, nil
	}
	if errors.Is(classify(err), ErrBusy) {
		return nil, fmt.Errorf("reading SRK 0x%08x: %w", uint32(persistSRK), classify(err))
	}
	cp, err := (tpm2.CreatePrimary{
		PrimaryHandle: tpm2.AuthHandle{Handle: tpm2.TPMRHOwner, Auth: tpm2.PasswordAuth(nil)},
		InPublic:      tpm2.New2B(srkTemplate()),
	}).Execute(t.counter)
	if err != nil {
		return nil, fmt.Errorf("creating SRK in the owner hierarchy (is owner auth set?): %w", classify(err))
	}
	o := &object{handle: cp.ObjectHandle, name: cp.Name, transient: true}
	if t.persist && t.persistBestEffort(o, persistSRK, "SRK") {
		t.srkName = cp.Name.Buffer
	}
	return o, nil
}

func (t *TPM) parentAuth(srk *object) tpm2.AuthHandle {
	return tpm2.AuthHandle{Handle: srk.handle, Name: srk.name, Auth: tpm2.PasswordAuth(nil)}
}

func (t *TPM) loadAK(srk *object, b *akBlob) error {
	rsp, err := (tpm2.Load{
		ParentHandle: t.parentAuth(srk),
		InPrivate:    tpm2.TPM2BPrivate{Buffer: b.Private},
		InPublic:     tpm2.BytesAs2B[tpm2.TPMTPublic](b.Public),
	}).Execute(t.counter)
	if err != nil {
		return fmt.Errorf("loading cached AK: %w", classify(err))
	}
	t.ak = &object{handle: rsp.ObjectHandle, name: rsp.Name, transient: true}
	t.akParams = &wire.AttestationParameters{
		Public:            b.Public,
		CreateData:        b.CreateData,
		CreateAttestation: b.CreateAttestation,
		CreateSignature:   b.CreateSignature,
	}
	return t.rememberAK(b.Private)
}

func (t *TPM) createAK(srk *object) error {
	cr, err := (tpm2.Create{
		ParentHandle: t.parentAuth(srk),
		InPublic:     tpm2.New2B(akTemplate()),
	}).Execute(t.counter)
	if err != nil {
		return fmt.Errorf("creating AK: %w", classify(err))
	}
	ld, err := (tpm2.Load{
		ParentHandle: t.parentAuth(srk),
		InPrivate:    cr.OutPrivate,
		InPublic:     cr.OutPublic,
	}).Execute(t.counter)
	if err != nil {
		return fmt.Errorf("loading new AK: %w", classify(err))
	}
	ak := &object{handle: ld.ObjectHandle, name: ld.Name, transient: true}
	cc, err := (tpm2.CertifyCreation{
		SignHandle:     tpm2.AuthHandle{Handle: ak.handle, Name: ak.name, Auth: tpm2.PasswordAuth(nil)},
		ObjectHandle:   tpm2.NamedHandle{Handle: ak.handle, Name: ak.name},
		CreationHash:   cr.CreationHash,
		CreationTicket: cr.CreationTicket,
		InScheme: tpm2.TPMTSigScheme{
			Scheme:  tpm2.TPMAlgRSASSA,
			Details: tpm2.NewTPMUSigScheme(tpm2.TPMAlgRSASSA, &tpm2.TPMSSchemeHash{HashAlg: tpm2.TPMAlgSHA256}),
		},
	}).Execute(t.counter)
	if err != nil {
		t.flush(ak)
		return fmt.Errorf("certifying AK creation: %w", classify(err))
	}
	t.ak = ak
	t.akParams = &wire.AttestationParameters{
		Public:            cr.OutPublic.Bytes(),
		CreateData:        cr.CreationData.Bytes(),
		CreateAttestation: cc.CertifyInfo.Bytes(),
		CreateSignature:   tpm2.Marshal(cc.Signature),
	}
	t.log.Info("new AK created")
	return t.rememberAK(cr.OutPrivate.Buffer)
}

func (t *TPM) rememberAK(private []byte) error {
	b, err := json.Marshal(akBlob{
		Version:           akBlobVersion,
		Public:            t.akParams.Public,
		Private:           private,
		CreateData:        t.akParams.CreateData,
		CreateAttestation: t.akParams.CreateAttestation,
		CreateSignature:   t.akParams.CreateSignature,
		EKHash:            t.ekHash,
		SRKName:           t.srkName,
	})
	if err != nil {
		return fmt.Errorf("encoding AK blob: %w", err)
	}
	t.akBlob = b
	return nil
}

// tokenLocked returns the Authorization header, building it once per run.
func (t *TPM) tokenLocked() (string, error) {
	if t.token != "" {
		return t.token, nil
	}
	if err := t.ensureAK(); err != nil {
		return "", err
	}
	var ekPEM []byte
	if t.ekCert != nil {
		ekPEM = wire.EncodeCertificatePEM(t.ekCert)
	} else {
		var err error
		if ekPEM, err = wire.EncodePublicKeyPEM(t.ekPub); err != nil {
			return "", err
		}
	}
	tok, err := wire.EncodeToken(wire.AttestationData{EK: ekPEM, AK: t.akParams})
	if err != nil {
		return "", err
	}
	t.token = tok
	return tok, nil
}
