package credentials

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/secretvolume"
)

// Each way the credential files change is a change of dirState, and
// looking again without a change is not.
func TestDirStateSeesEachChange(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "credentials")
	state := dirState(dir)
	step := func(what string, change func() error) {
		t.Helper()
		if err := change(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		now := dirState(dir)
		if now == state {
			t.Errorf("%s: not seen (state %q)", what, now)
		}
		if again := dirState(dir); again != now {
			t.Errorf("%s: the state changed without a change: %q then %q", what, now, again)
		}
		state = now
	}
	step("the optional volume appears, empty", func() error { return os.Mkdir(dir, 0o755) })
	step("the Secret is created", func() error { return secretvolume.Write(dir, map[string]string{"token": "a"}) })
	step("the Secret is rotated to a value of the same length", func() error {
		return secretvolume.Write(dir, map[string]string{"token": "b"})
	})
	step("a key is added", func() error {
		return secretvolume.Write(dir, map[string]string{"token": "b", "ca.pem": "c"})
	})
	step("a key is removed", func() error { return secretvolume.Write(dir, map[string]string{"ca.pem": "c"}) })
	// Outside a cluster (make dev) files are written in place.
	plain := filepath.Join(dir, "plain")
	step("a plain file is written", func() error { return os.WriteFile(plain, []byte("x"), 0o600) })
	step("it is rewritten with the same length", func() error {
		if err := os.WriteFile(plain, []byte("y"), 0o600); err != nil {
			return err
		}
		// Make the change visible even where the clock is coarse.
		later := time.Now().Add(time.Second)
		return os.Chtimes(plain, later, later)
	})
	// A link moved between two files that match in size and time: only
	// the link's target tells them apart.
	same := time.Now().Add(-time.Hour)
	for _, name := range []string{"a", "b"} {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte("z"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(f, same, same); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "current")
	step("a link to one of two like files appears", func() error { return os.Symlink("a", link) })
	step("the link moves to the other", func() error {
		if err := os.Symlink("b", link+".new"); err != nil {
			return err
		}
		return os.Rename(link+".new", link)
	})
	step("the file it points at goes, leaving it dangling", func() error { return os.Remove(filepath.Join(dir, "b")) })
	step("the volume goes", func() error { return os.RemoveAll(dir) })
}

// The kubelet's atomic writer works in steps a poll can fall between: a
// new hidden payload directory, its files, a temporary link, then the swap
// of `..data`. Only the swap changes what a reader of the files sees, so
// only the swap is a change: a poll between two steps must not act twice
// on one rotation.
func TestDirStateIgnoresTheWritersHiddenSteps(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "credentials")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := secretvolume.Write(dir, map[string]string{"token": "a"}); err != nil {
		t.Fatal(err)
	}
	before := dirState(dir)
	payload := filepath.Join(dir, "..2026_12_04_17_00_00.123")
	steps := []struct {
		what   string
		change func() error
	}{
		{"a new payload directory", func() error { return os.Mkdir(payload, 0o755) }},
		{"a file in it", func() error { return os.WriteFile(filepath.Join(payload, "token"), []byte("b"), 0o644) }},
		{"a temporary link to it", func() error { return os.Symlink(filepath.Base(payload), filepath.Join(dir, "..data_tmp")) }},
	}
	for _, s := range steps {
		if err := s.change(); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		if now := dirState(dir); now != before {
			t.Errorf("%s is seen as a change: %q, was %q", s.what, now, before)
		}
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if dirState(dir) == before {
		t.Error("the swap of ..data is not seen")
	}
}
