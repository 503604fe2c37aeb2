package oci

import (
	"debug/buildinfo"
	"fmt"
	"strings"
)

// GoModules returns what `go version -m` prints for a Go binary — the
// toolchain, the main module, every module compiled in with its version
// and checksum, the build settings — under the name the binary has in the
// image: the SBOM of its Go code, read from the build info the linker
// embeds (debug/buildinfo, the package `go version -m` uses).
func GoModules(binary, imagePath string) (string, error) {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return "", fmt.Errorf("binary %s: %w", binary, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s\n", imagePath, bi.GoVersion)
	for _, line := range strings.Split(strings.TrimSuffix(bi.String(), "\n"), "\n") {
		if strings.HasPrefix(line, "go\t") {
			continue
		}
		b.WriteString("\t" + line + "\n")
	}
	return b.String(), nil
}
