package tpm

import (
	"context"
	"fmt"
)

// Auth kinds, the value of the `auth` annotation.
const (
	KindTPM         = "tpm"
	KindEmulatedTPM = "emulated-tpm"
)

// authenticator is the protocol.Authenticator of a TPM.
type authenticator struct{ t *TPM }

func (a authenticator) Kind() string {
	if a.t.emulated {
		return KindEmulatedTPM
	}
	return KindTPM
}

// Token does all slow TPM work (EK, SRK, AK): it runs before dialing, since
// the server gives the client 10 s after the upgrade.
func (a authenticator) Token(ctx context.Context) (string, error) {
	if err := checkCtx(ctx); err != nil {
		return "", fmt.Errorf("TPM token: %w", err)
	}
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	if err := a.t.usable(); err != nil {
		return "", err
	}
	tok, err := a.t.tokenLocked()
	if err != nil {
		return "", fmt.Errorf("TPM token: %w", err)
	}
	return tok, nil
}

func (a authenticator) Answer(ctx context.Context, challenge []byte) ([]byte, error) {
	if err := checkCtx(ctx); err != nil {
		return nil, fmt.Errorf("TPM challenge: %w", err)
	}
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	if err := a.t.usable(); err != nil {
		return nil, err
	}
	return a.t.answerLocked(challenge)
}

func (a authenticator) HasChallenge() bool { return true }
