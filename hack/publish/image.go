package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"flag"
	"fmt"
	"io"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v2/pkg/oci/remote"
	"github.com/sigstore/cosign/v2/pkg/oci/static"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/options"
	sigpayload "github.com/sigstore/sigstore/pkg/signature/payload"
)

// pushImage pushes the image index an OCI layout holds (oci-index
// -layout) to -ref and signs its digest with -key, as `cosign sign --key`
// does: a simple-signing payload naming the digest, signed, stored beside
// the image under cosign's sha256-<digest>.sig tag. It prints the pushed
// reference by digest.
func pushImage(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("publish image", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("layout", "", "The OCI layout holding the image index (required).")
	refFlag := fs.String("ref", "", "Where to push it, REGISTRY/REPOSITORY:TAG (required).")
	keyFile := fs.String("key", "", "The cosign private key to sign it with (required; password COSIGN_PASSWORD).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dir == "" || *refFlag == "" || *keyFile == "" {
		return fmt.Errorf("image: -layout, -ref and -key are required")
	}
	ref, err := name.NewTag(*refFlag)
	if err != nil {
		return fmt.Errorf("-ref %q: %w", *refFlag, err)
	}
	sv, err := signerFrom(*keyFile)
	if err != nil {
		return err
	}
	idx, err := onlyIndex(*dir)
	if err != nil {
		return fmt.Errorf("-layout %s: %w", *dir, err)
	}
	if err := remote.WriteIndex(ref, idx, remote.WithContext(ctx)); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	h, err := idx.Digest()
	if err != nil {
		return err
	}
	digest := ref.Context().Digest(h.String())
	if err := sign(ctx, digest, sv); err != nil {
		return fmt.Errorf("sign %s: %w", digest, err)
	}
	fmt.Fprintln(stdout, digest)
	return nil
}

// onlyIndex is the one image index an OCI layout names (oci-index writes
// one entry per tag, all the same index).
func onlyIndex(dir string) (v1.ImageIndex, error) {
	outer, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := outer.IndexManifest()
	if err != nil {
		return nil, err
	}
	if len(m.Manifests) == 0 {
		return nil, fmt.Errorf("names nothing")
	}
	for _, d := range m.Manifests[1:] {
		if d.Digest != m.Manifests[0].Digest {
			return nil, fmt.Errorf("names more than one artifact (%s, %s)", m.Manifests[0].Digest, d.Digest)
		}
	}
	return outer.ImageIndex(m.Manifests[0].Digest)
}

// sign attaches a cosign signature of digest to it in its registry.
func sign(ctx context.Context, digest name.Digest, sv signature.Signer) error {
	payload, err := (&sigpayload.Cosign{Image: digest}).MarshalJSON()
	if err != nil {
		return err
	}
	sig, err := sv.SignMessage(bytes.NewReader(payload), options.WithContext(ctx))
	if err != nil {
		return err
	}
	ociSig, err := static.NewSignature(payload, base64.StdEncoding.EncodeToString(sig))
	if err != nil {
		return err
	}
	opts := ociremote.WithRemoteOptions(remote.WithContext(ctx))
	se, err := ociremote.SignedEntity(digest, opts)
	if err != nil {
		return err
	}
	signed, err := mutate.AttachSignatureToEntity(se, ociSig)
	if err != nil {
		return err
	}
	return ociremote.WriteSignatures(digest.Repository, signed, opts)
}
