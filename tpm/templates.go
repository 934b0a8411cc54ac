package tpm

import "github.com/google/go-tpm/tpm2"

// Well-known handles (TCG EK Credential Profile, TCG Provisioning Guidance).
const (
	nvEKCertRSA  = tpm2.TPMHandle(0x01C00002)
	nvEKNonceRSA = tpm2.TPMHandle(0x01C00003)
	persistSRK   = tpm2.TPMHandle(0x81000001)
	persistEK    = tpm2.TPMHandle(0x81010001)
)

// ekTemplate is the TCG default RSA EK template; a nonce read from NV (when
// the manufacturer provisioned one) goes at the front of unique, which is
// otherwise 256 zero bytes (docs/protocol.md §4.4).
func ekTemplate(nonce []byte) tpm2.TPMTPublic {
	t := tpm2.RSAEKTemplate
	unique := make([]byte, 256)
	copy(unique, nonce)
	t.Unique = tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: unique})
	return t
}

// srkTemplate is what go-attestation creates at 0x81000001 when nothing is
// there (docs/protocol.md §4.4); go-tpm's template is byte-identical.
func srkTemplate() tpm2.TPMTPublic { return tpm2.RSASRKTemplate }

// akTemplate is go-attestation's AK: RSA-2048 restricted signing key with
// RSASSA-SHA256. The v0.5.1 server verifies CreateSignature with the hash of
// this scheme, so it must not change.
func akTemplate() tpm2.TPMTPublic {
	return tpm2.TPMTPublic{
		Type:    tpm2.TPMAlgRSA,
		NameAlg: tpm2.TPMAlgSHA256,
		ObjectAttributes: tpm2.TPMAObject{
			FixedTPM:            true,
			FixedParent:         true,
			SensitiveDataOrigin: true,
			UserWithAuth:        true,
			NoDA:                true,
			Restricted:          true,
			SignEncrypt:         true,
		},
		Parameters: tpm2.NewTPMUPublicParms(tpm2.TPMAlgRSA, &tpm2.TPMSRSAParms{
			Symmetric: tpm2.TPMTSymDefObject{Algorithm: tpm2.TPMAlgNull},
			Scheme: tpm2.TPMTRSAScheme{
				Scheme: tpm2.TPMAlgRSASSA,
				Details: tpm2.NewTPMUAsymScheme(tpm2.TPMAlgRSASSA,
					&tpm2.TPMSSigSchemeRSASSA{HashAlg: tpm2.TPMAlgSHA256}),
			},
			KeyBits: 2048,
		}),
		Unique: tpm2.NewTPMUPublicID(tpm2.TPMAlgRSA, &tpm2.TPM2BPublicKeyRSA{Buffer: []byte{}}),
	}
}
