package oci

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"runtime/debug"
	"strings"
	"time"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// GoSBOM returns a CycloneDX SBOM (JSON, spec 1.6) of a Go binary: the
// binary as the BOM's subject with its SHA-256, and a component per Go
// module compiled in (the toolchain's standard library among them), each
// with its package URL, as `go version -m` lists them — read from the
// build info the linker embeds (debug/buildinfo), with the build settings
// (GOOS, GOARCH, CGO_ENABLED, -tags) as properties of the CycloneDX
// taxonomy's gomod namespace. The format is CycloneDX's own Go library;
// nothing is written by hand. It is the same on every build of the same
// binary: its time is created, its serial number comes from the binary's
// hash.
func GoSBOM(binary, imagePath string, created time.Time) ([]byte, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("binary %s: %w", binary, err)
	}
	bi, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("binary %s: %w", binary, err)
	}
	sum := sha256.Sum256(data)
	subject := module(&bi.Main, cdx.ComponentTypeApplication)
	subject.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: hex.EncodeToString(sum[:])}}
	props := []cdx.Property{{Name: "cdx:gomod:binary:name", Value: imagePath}}
	for _, s := range bi.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "GOAMD64", "GOARM64", "CGO_ENABLED", "-tags", "-trimpath", "-ldflags":
			props = append(props, cdx.Property{Name: "cdx:gomod:build:env:" + strings.TrimPrefix(s.Key, "-"), Value: s.Value})
		}
	}
	subject.Properties = &props

	std := cdx.Component{
		BOMRef: "pkg:golang/std@" + bi.GoVersion, Type: cdx.ComponentTypeLibrary,
		Name: "std", Version: bi.GoVersion, PackageURL: "pkg:golang/std@" + bi.GoVersion,
	}
	components := []cdx.Component{std}
	refs := []string{std.BOMRef}
	for _, m := range bi.Deps {
		c := module(m, cdx.ComponentTypeLibrary)
		components = append(components, c)
		refs = append(refs, c.BOMRef)
	}

	bom := cdx.NewBOM()
	bom.SerialNumber = "urn:uuid:" + uuidOf(sum)
	bom.Metadata = &cdx.Metadata{
		Timestamp: created.UTC().Format(time.RFC3339),
		Component: &subject,
		Tools: &cdx.ToolsChoice{Components: &[]cdx.Component{{
			Type: cdx.ComponentTypeLibrary, Name: "github.com/CycloneDX/cyclonedx-go",
			Description: "encodes this BOM; images/oci.GoSBOM fills it from the binary's build info",
		}}},
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: subject.BOMRef, Dependencies: &refs}}
	var out bytes.Buffer
	enc := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON).SetPretty(true)
	if err := enc.EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		return nil, fmt.Errorf("binary %s: the SBOM: %w", binary, err)
	}
	return out.Bytes(), nil
}

// module is a Go module as a component: what it was replaced by, if it
// was, since that is the code compiled in.
func module(m *debug.Module, kind cdx.ComponentType) cdx.Component {
	if m.Replace != nil {
		m = m.Replace
	}
	version := m.Version
	if version == "" {
		version = "(devel)"
	}
	purl := "pkg:golang/" + m.Path + "@" + url.PathEscape(version)
	return cdx.Component{BOMRef: purl, Type: kind, Name: m.Path, Version: version, PackageURL: purl}
}

// uuidOf is a UUID (version 5 layout: a name-based one) from a SHA-256.
func uuidOf(sum [32]byte) string {
	u := sum[:16]
	u[6] = u[6]&0x0f | 0x50
	u[8] = u[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16])
}
