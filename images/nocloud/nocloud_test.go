package nocloud

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kdomanski/iso9660"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

func testSeed() Seed {
	return Seed{
		// Bytes a careless writer would change: CRLF, trailing blanks,
		// non-ASCII, no final newline.
		UserData:      []byte("#cloud-config\r\nwrite_files:\n  - content: \"grüße \\t\"  \n# end"),
		InstanceID:    "i-web-1a2b3c",
		Hostname:      "web-1a2b3c",
		NetworkConfig: []byte("version: 2\nethernets:\n  eth0: {dhcp4: true}\n"),
	}
}

func build(t *testing.T, s Seed) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := s.WriteTo(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Errorf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

// The seed is read back with xorriso, an independent ISO 9660 reader, and
// holds the exact bytes given.
func TestSeedReadBackWithXorriso(t *testing.T) {
	if _, err := exec.LookPath("xorriso"); err != nil {
		t.Fatal("xorriso is required (Debian package xorriso; hack/install-deps.sh installs it)")
	}
	s := testSeed()
	dir := t.TempDir()
	iso := filepath.Join(dir, "seed.iso")
	if err := os.WriteFile(iso, build(t, s), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	cmd := exec.CommandContext(t.Context(), "xorriso", "-osirrox", "on", "-indev", iso, "-extract", "/", out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v\n%s", err, b)
	}
	pvd, err := exec.CommandContext(t.Context(), "xorriso", "-indev", iso, "-pvd_info").CombinedOutput()
	if err != nil || !strings.Contains(string(pvd), "Volume Id    : cidata") {
		t.Errorf("volume label is not cidata: %v\n%s", err, pvd)
	}
	for name, want := range map[string][]byte{"user-data": s.UserData, "meta-data": s.MetaData(), "network-config": s.NetworkConfig} {
		got, err := os.ReadFile(filepath.Join(out, name+";1"))
		if errors.Is(err, os.ErrNotExist) {
			got, err = os.ReadFile(filepath.Join(out, name))
		}
		if err != nil {
			entries, _ := os.ReadDir(out)
			t.Fatalf("%s not in the image (%v): %v", name, entries, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s reads back as %q, want %q", name, got, want)
		}
	}
}

// The library's own reader agrees, and network-config is absent when not
// given.
func TestSeedWithoutNetworkConfig(t *testing.T) {
	s := testSeed()
	s.NetworkConfig = nil
	img, err := iso9660.OpenImage(bytes.NewReader(build(t, s)))
	if err != nil {
		t.Fatal(err)
	}
	if label, _ := img.Label(); label != VolumeLabel {
		t.Errorf("label %q", label)
	}
	root, err := img.RootDir()
	if err != nil {
		t.Fatal(err)
	}
	children, err := root.GetChildren()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	for _, c := range children {
		data, _ := io.ReadAll(c.Reader())
		got[c.Name()] = data
	}
	if len(got) != 2 || !bytes.Equal(got["user-data"], s.UserData) || string(got["meta-data"]) != "instance-id: i-web-1a2b3c\nlocal-hostname: web-1a2b3c\n" {
		t.Errorf("image holds %q", got)
	}
}

func TestSeedValidation(t *testing.T) {
	for _, tc := range []struct {
		field  string
		mutate func(*Seed)
	}{
		{"userData", func(s *Seed) { s.UserData = make([]byte, MaxUserData+1) }},
		{"instanceID", func(s *Seed) { s.InstanceID = "i d" }},
		{"instanceID", func(s *Seed) { s.InstanceID = "" }},
		{"hostname", func(s *Seed) { s.Hostname = "Web_1" }},
		{"networkConfig", func(s *Seed) { s.NetworkConfig = make([]byte, MaxDocument+1) }},
	} {
		s := testSeed()
		tc.mutate(&s)
		var buf bytes.Buffer
		_, err := s.WriteTo(&buf)
		var fe *contract.FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, contract.ErrPermanent) {
			t.Errorf("%s: got %v, want a permanent error naming the field", tc.field, err)
		}
		if buf.Len() != 0 {
			t.Errorf("%s: %d bytes written before the error", tc.field, buf.Len())
		}
	}
}

func BenchmarkSeed(b *testing.B) {
	s := testSeed()
	for b.Loop() {
		if _, err := s.WriteTo(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
}

var benchInputs = flag.String("bench-inputs", "", "write the benchmark seed's files into this directory (for hack/bench-seed.sh)")

// TestWriteBenchInputs writes the files BenchmarkSeed packs, so
// hack/bench-seed.sh can give cloud-localds the same inputs.
func TestWriteBenchInputs(t *testing.T) {
	if *benchInputs == "" {
		t.Skip("only for hack/bench-seed.sh")
	}
	s := testSeed()
	for name, data := range map[string][]byte{"user-data": s.UserData, "meta-data": s.MetaData(), "network-config": s.NetworkConfig} {
		if err := os.WriteFile(filepath.Join(*benchInputs, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
