package main

import (
	"crypto"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sigstore/cosign/v2/pkg/cosign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// keygen writes a key pair as `cosign generate-key-pair` does: the
// private key encrypted with COSIGN_PASSWORD, the public key in PEM.
func keygen(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish keygen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "Write cosign.key and cosign.pub here (required).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" {
		return fmt.Errorf("keygen -dir: required")
	}
	keys, err := cosign.GenerateKeyPair(password)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*dir, "cosign.key"), keys.PrivateBytes, 0o600); err != nil {
		return err
	}
	pub := filepath.Join(*dir, "cosign.pub")
	if err := os.WriteFile(pub, keys.PublicBytes, 0o644); err != nil {
		return err
	}
	fmt.Fprintln(stdout, pub)
	return nil
}

// password is COSIGN_PASSWORD, as cosign reads it.
func password(bool) ([]byte, error) { return []byte(os.Getenv("COSIGN_PASSWORD")), nil }

// signerFrom loads an encrypted private key (cosign.key).
func signerFrom(file string) (signature.SignerVerifier, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pass, _ := password(false)
	sv, err := cosign.LoadPrivateKey(b, pass, nil)
	if err != nil {
		return nil, fmt.Errorf("-key %s: %w", file, err)
	}
	return sv, nil
}

// verifierFrom loads a public key (cosign.pub).
func verifierFrom(file string) (signature.Verifier, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	pub, err := cryptoutils.UnmarshalPEMToPublicKey(b)
	if err != nil {
		return nil, fmt.Errorf("-key %s: %w", file, err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("-key %s: %w", file, err)
	}
	return v, nil
}
