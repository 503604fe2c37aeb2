package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/cosign"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
)

// verify checks, with cosign's own verification, that the image -ref
// names carries a signature by -key over its digest: what `cosign verify
// --key cosign.pub --insecure-ignore-tlog` checks (the signature is made
// offline, with no transparency log entry). It prints the digest
// verified.
func verify(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish verify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	refFlag := fs.String("ref", "", "The image, REGISTRY/REPOSITORY:TAG or @DIGEST (required).")
	keyFile := fs.String("key", "", "The cosign public key (required).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *refFlag == "" || *keyFile == "" {
		return fmt.Errorf("verify: -ref and -key are required")
	}
	ref, err := name.ParseReference(*refFlag)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", *refFlag, err)
	}
	v, err := verifierFrom(*keyFile)
	if err != nil {
		return err
	}
	sigs, _, err := cosign.VerifyImageSignatures(ctx, ref, &cosign.CheckOpts{
		SigVerifier:        v,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		IgnoreTlog:         true,
		IgnoreSCT:          true,
		RegistryClientOpts: []ociremote.Option{ociremote.WithRemoteOptions(remote.WithContext(ctx))},
	})
	if err != nil {
		return fmt.Errorf("%s: %w", ref, err)
	}
	d, err := remote.Head(ref, remote.WithContext(ctx))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s@%s: %d signature(s) by %s verified\n", ref.Context(), d.Digest, len(sigs), *keyFile)
	return nil
}
