package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/egress-proxies/egress-proxies-operator/images/oci/internal/hello"
)

func flags(bin, out string) []string {
	return []string{
		"-o", out, "-tag", "hello:v1", "-binary", bin + "=/usr/local/bin/hello",
		"-user", "65532:65532", "-user-name", "nonroot", "-dir", "/tmp:1777",
		"-label", "org.opencontainers.image.version=v1", "-go-modules", "/usr/share/doc/hello/go-modules.txt",
		"-sbom", "/usr/share/doc/hello/sbom.cdx.json", "-source-date-epoch", "1700000000",
	}
}

// Two runs on the same inputs write the same bytes and print one digest.
func TestTwoRunsOneDigest(t *testing.T) {
	bin := hello.Build(t, "")
	var digests []string
	var tars, sboms [][]byte
	for range 2 {
		out := filepath.Join(t.TempDir(), "hello.tar")
		var stdout, stderr bytes.Buffer
		if err := run(flags(bin, out), &stdout, &stderr); err != nil {
			t.Fatalf("run: %v\n%s", err, stderr.String())
		}
		digests = append(digests, strings.TrimSpace(stdout.String()))
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		tars = append(tars, b)
		sbom, err := os.ReadFile(strings.TrimSuffix(out, ".tar") + ".go-modules.txt")
		if err != nil || !strings.HasPrefix(string(sbom), "/usr/local/bin/hello: go") {
			t.Errorf("the module list beside the tarball: %q, %v", sbom, err)
		}
		cdx, err := os.ReadFile(strings.TrimSuffix(out, ".tar") + ".cdx.json")
		if err != nil || !bytes.Contains(cdx, []byte(`"bomFormat": "CycloneDX"`)) {
			t.Errorf("the CycloneDX SBOM beside the tarball: %.80q, %v", cdx, err)
		}
		sboms = append(sboms, cdx)
	}
	if digests[0] != digests[1] || !strings.HasPrefix(digests[0], "sha256:") {
		t.Errorf("two runs printed %q and %q, want one sha256 digest", digests[0], digests[1])
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Error("two runs wrote different tarballs")
	}
	if !bytes.Equal(sboms[0], sboms[1]) {
		t.Error("two runs wrote different SBOMs")
	}
}

// The tarball names the tag and holds a config that runs the binary as
// the user given.
func TestTarballRunsAsGiven(t *testing.T) {
	out := filepath.Join(t.TempDir(), "hello.tar")
	var stdout, stderr bytes.Buffer
	if err := run(flags(hello.Build(t, ""), out), &stdout, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	tag, err := name.NewTag("hello:v1")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatalf("the tarball has no image tagged hello:v1: %v", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/usr/local/bin/hello" ||
		c.Labels["org.opencontainers.image.version"] != "v1" || c.WorkingDir != "/" {
		t.Errorf("config: %+v", c)
	}
}

// Bad input is refused naming the flag and the value, before any output
// is written.
func TestFlagsRefused(t *testing.T) {
	bin := hello.Build(t, "")
	for _, tc := range []struct {
		change []string
		want   string
	}{
		{[]string{"-dir", "/tmp:17777"}, `-dir "/tmp:17777"`},
		{[]string{"-dir", "/a:0755:1"}, `-dir "/a:0755:1"`},
		{[]string{"-user", "nonroot"}, `-user: "nonroot": want UID:GID`},
		{[]string{"-label", "novalue"}, `-label "novalue"`},
		{[]string{"-source-date-epoch", "yesterday"}, `-source-date-epoch "yesterday"`},
		{[]string{"-platform", "amd64"}, `-platform "amd64"`},
		{[]string{"-tag", "Bad:Tag:x"}, `tag "Bad:Tag:x"`},
		{[]string{"-file", "nohostpath"}, `-file "nohostpath"`},
		{[]string{"-binary", bin + "=/hello:0644"}, "mode -rw-r--r-- is not executable"},
	} {
		out := filepath.Join(t.TempDir(), "hello.tar")
		var stdout, stderr bytes.Buffer
		err := run(append(flags(bin, out), tc.change...), &stdout, &stderr)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error containing %q", tc.change, err, tc.want)
		}
		if _, statErr := os.Stat(out); statErr == nil {
			t.Errorf("%v: refused, yet %s was written", tc.change, out)
		}
	}
	var stderr bytes.Buffer
	if err := run([]string{"-tag", "x:y", "-binary", bin + "=/x"}, &bytes.Buffer{}, &stderr); err == nil || err.Error() != "-o: required" {
		t.Errorf("no -o: %v", err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	out := filepath.Join(t.TempDir(), "hello.tar")
	args := flags(bin, out)
	args = args[:len(args)-2] // no -source-date-epoch
	if err := run(args, &bytes.Buffer{}, &stderr); err == nil || !strings.Contains(err.Error(), "SOURCE_DATE_EPOCH") {
		t.Errorf("no time given: %v", err)
	}
}

// A host file from a Debian package brings the package's copyright file,
// and the package and its version are listed in the image and beside it.
func TestDebianPackagesListed(t *testing.T) {
	if _, err := os.Stat("/var/lib/dpkg/info/base-files.list"); err != nil {
		t.Skip("not a Debian system")
	}
	out := filepath.Join(t.TempDir(), "hello.tar")
	args := append(flags(hello.Build(t, ""), out), "-host-path", "/etc/debian_version", "-debian-packages", "/usr/share/doc/hello/debian-packages.txt")
	var stderr bytes.Buffer
	if err := run(args, &bytes.Buffer{}, &stderr); err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	list, err := os.ReadFile(strings.TrimSuffix(out, ".tar") + ".debian-packages.txt")
	if err != nil || !strings.HasPrefix(string(list), "base-files ") || strings.Count(string(list), "\n") != 1 {
		t.Fatalf("the Debian package list beside the tarball: %q, %v; want base-files alone", list, err)
	}
	tag, _ := name.NewTag("hello:v1")
	img, err := tarball.ImageFromPath(out, &tag)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	if files["usr/share/doc/hello/debian-packages.txt"] != string(list) {
		t.Errorf("the list in the image: %q, beside it: %q", files["usr/share/doc/hello/debian-packages.txt"], list)
	}
	if _, ok := files["usr/share/doc/base-files/copyright"]; !ok {
		t.Error("the image lacks base-files' copyright")
	}
	if _, ok := files["etc/debian_version"]; !ok {
		t.Error("the image lacks /etc/debian_version")
	}
}
