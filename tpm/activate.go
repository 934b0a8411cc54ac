package tpm

import (
	"errors"
	"fmt"

	"github.com/google/go-tpm/tpm2"
	"github.com/google/go-tpm/tpm2/transport"

	"github.com/nodereg/nodereg/tpm/wire"
)

// activationEK returns the EK to decrypt with. It must be the key whose
// public went into the token (the server encrypted to it), so unlike upstream
// a key at 0x81010001 is used only when its public equals ours.
func (t *TPM) activationEK() (*object, error) {
	if t.ek != nil && !t.ek.transient {
		return t.ek, nil // persistent, already matched
	}
	var persisted *object
	persistedFree := false
	if t.persist {
		o, pub, err := t.readPersistent(persistEK)
		switch {
		case err == nil && pub != nil && pub.Equal(t.ekPub):
			persisted = o
		case err != nil && errors.Is(err, ErrBusy):
			return nil, fmt.Errorf("reading persistent EK: %w", err)
		case err != nil:
			persistedFree = true
		}
	}
	if t.ek == nil && persisted != nil {
		t.ek = persisted
		return t.ek, nil
	}
	if t.ek == nil {
		// EK from a certificate, not persisted: derive it and make sure the
		// certificate names this TPM's key.
		o, pub, err := t.createEK()
		if err != nil {
			return nil, err
		}
		if !pub.Equal(t.ekPub) {
			t.flush(o)
			return nil, fmt.Errorf("%w: the EK certificate's key is not the key of the default EK template", ErrNoEK)
		}
		t.ek = o
	}
	if persistedFree {
		t.persistBestEffort(t.ek, persistEK, "EK")
	}
	return t.ek, nil
}

// answerLocked decrypts the challenge with ActivateCredential and returns
// the response message.
func (t *TPM) answerLocked(challenge []byte) ([]byte, error) {
	if t.ak == nil {
		return nil, errors.New("answering TPM challenge: no AK loaded, Token must come first")
	}
	idObject, encSecret, err := wire.DecodeChallenge(challenge)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrActivation, err)
	}
	ek, err := t.activationEK()
	if err != nil {
		return nil, fmt.Errorf("answering TPM challenge: %w", err)
	}
	// The EK's policy is PolicySecret(endorsement); a one-shot session
	// satisfies it and is flushed by the TPM after use.
	policy := tpm2.Policy(tpm2.TPMAlgSHA256, 16, func(tp transport.TPM, h tpm2.TPMISHPolicy, _ tpm2.TPM2BNonce) error {
		_, err := (tpm2.PolicySecret{
			AuthHandle:    tpm2.AuthHandle{Handle: tpm2.TPMRHEndorsement, Auth: tpm2.PasswordAuth(nil)},
			PolicySession: h,
		}).Execute(tp)
		if err != nil {
			return fmt.Errorf("PolicySecret(endorsement) (is endorsement auth set?): %w", err)
		}
		return nil
	})
	rsp, err := (tpm2.ActivateCredential{
		ActivateHandle: tpm2.AuthHandle{Handle: t.ak.handle, Name: t.ak.name, Auth: tpm2.PasswordAuth(nil)},
		KeyHandle:      tpm2.AuthHandle{Handle: ek.handle, Name: ek.name, Auth: policy},
		CredentialBlob: tpm2.TPM2BIDObject{Buffer: idObject},
		Secret:         tpm2.TPM2BEncryptedSecret{Buffer: encSecret},
	}).Execute(t.counter)
	if err != nil {
		if c := classify(err); errors.Is(c, ErrBusy) {
			return nil, fmt.Errorf("answering TPM challenge: %w", c)
		}
		return nil, fmt.Errorf("%w: %w", ErrActivation, err)
	}
	return wire.EncodeResponse(rsp.CertInfo.Buffer)
}
