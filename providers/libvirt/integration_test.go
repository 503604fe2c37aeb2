package libvirt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// serveImage serves the qcow2 file at path on loopback and returns its
// catalogue entry and a counter of the GETs served.
func serveImage(t *testing.T, path string) (fetch.Entry, *atomic.Int64) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	var gets atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		http.ServeContent(w, r, filepath.Base(path), fixedTime, f)
	}))
	t.Cleanup(srv.Close)
	return fetch.Entry{URL: srv.URL + "/" + filepath.Base(path), SHA256: hex.EncodeToString(h.Sum(nil)), Format: "qcow2"}, &gets
}

func labProvider(t *testing.T, l lab, image fetch.Entry) *Provider {
	t.Helper()
	p, err := New(Config{
		Regions:      map[string]Region{"lab": {URI: l.uri, Pool: l.pool, Network: l.network}},
		DomainType:   envOr("LIBVIRT_TEST_DOMAIN_TYPE", "qemu"),
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 1024, DiskGiB: 4}},
		Images:       map[string]fetch.Entry{"proxy": image},
		SerialLogDir: l.logDir,
		// LIBVIRT_TEST_ADDRESS_SOURCES=agent checks the guest agent path alone.
		AddressSources: strings.FieldsFunc(os.Getenv("LIBVIRT_TEST_ADDRESS_SOURCES"), func(r rune) bool { return r == ',' }),
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// download reads a volume back through virStorageVolDownload.
func download(t *testing.T, uri, pool, name string) []byte {
	t.Helper()
	c, err := libvirt.NewConnect(uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	var out bytes.Buffer
	err = withPool(c, pool, func(p *libvirt.StoragePool) error {
		vol, err := p.LookupStorageVolByName(name)
		if err != nil {
			return err
		}
		defer func() { _ = vol.Free() }()
		st, err := c.NewStream(0)
		if err != nil {
			return err
		}
		defer func() { _ = st.Free() }()
		if err := vol.Download(st, 0, 0, 0); err != nil {
			return err
		}
		buf := make([]byte, 256<<10)
		for {
			n, err := st.Recv(buf)
			if errors.Is(err, io.EOF) || err == nil && n == 0 {
				return st.Finish()
			}
			if err != nil {
				return err
			}
			out.Write(buf[:n])
		}
	})
	if err != nil {
		t.Fatalf("download %s: %v", name, err)
	}
	return out.Bytes()
}

// TestVolumeUpload streams a base image and a seed into a real daemon's
// pool through virStorageVolUpload and reads them back: the image once
// per pool with its completeness marker, a failed checksum leaving
// nothing, the overlay backed by the base, the seed's user-data byte for
// byte, every check target OK, and the instance's volumes deleted by
// name, twice.
func TestVolumeUpload(t *testing.T) {
	l := realDaemon(t)
	imgPath := filepath.Join(t.TempDir(), "base.qcow2")
	if out, err := exec.CommandContext(t.Context(), "qemu-img", "create", "-q", "-f", "qcow2", imgPath, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	entry, gets := serveImage(t, imgPath)
	p := labProvider(t, l, entry)
	ctx := logr.NewContext(context.Background(), testr.New(t))
	req := contract.CreateRequest{Name: "egress-upload-test", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000aa", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"},
		CloudInit: []byte("#cloud-config\r\nwrite_files:\n  - content: \"grüße \\t \"  \n\n# end")}
	pl, err := p.plan(req)
	if err != nil {
		t.Fatal(err)
	}

	// A checksum that does not match leaves neither base nor marker.
	bad := pl
	bad.image.SHA256 = strings.Repeat("0", 64)
	if _, err := p.ensureImage(ctx, bad); !errors.Is(err, contract.ErrPermanent) {
		t.Fatalf("a checksum mismatch = %v, want ErrPermanent", err)
	}
	base := baseName(pl.imageKey, bad.image)
	if names := volumeNames(t, l); strings.Contains(strings.Join(names, " "), base) {
		t.Errorf("a failed fetch left %v", names)
	}

	basePath, err := p.ensureImage(ctx, pl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.ensureImage(ctx, pl); err != nil {
		t.Fatal(err)
	}
	if _, err := labProvider(t, l, entry).ensureImage(ctx, pl); err != nil {
		t.Fatal(err)
	}
	if n := gets.Load() - 1; n != 1 { // the failed fetch was one GET
		t.Errorf("the image was fetched %d times into one pool, want once", n)
	}
	want, _ := os.ReadFile(imgPath)
	if got := download(t, l.uri, l.pool, baseName(pl.imageKey, pl.image)); !bytes.Equal(got, want) {
		t.Errorf("the base volume holds %d bytes that differ from the image's %d", len(got), len(want))
	}

	if err := p.createOverlay(ctx, pl, req.Name, basePath); err != nil {
		t.Fatal(err)
	}
	if err := p.createSeed(ctx, pl, req); err != nil {
		t.Fatal(err)
	}
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	_ = withPool(c, l.pool, func(pool *libvirt.StoragePool) error {
		vol, err := pool.LookupStorageVolByName(overlayName(req.Name))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = vol.Free() }()
		doc, _ := vol.GetXMLDesc(0)
		var v libvirtxml.StorageVolume
		if err := v.Unmarshal(doc); err != nil {
			t.Fatal(err)
		}
		if v.BackingStore == nil || v.BackingStore.Path != basePath || v.Capacity.Value != 4<<30 {
			t.Errorf("overlay %s: want a 4 GiB qcow2 backed by %s", doc, basePath)
		}
		return nil
	})
	userData, err := readISOFile(download(t, l.uri, l.pool, seedName(req.Name)), "user-data")
	if err != nil || !bytes.Equal(userData, req.CloudInit) {
		t.Errorf("the seed volume's user-data = %q, %v; want %q", userData, err, req.CloudInit)
	}
	for _, r := range p.Check(ctx) {
		if !r.OK {
			t.Errorf("Check on a working daemon: %+v", r)
		} else {
			t.Logf("check %s: %v", r.Target, r.Details)
		}
	}
	for range 2 {
		if err := p.Delete(ctx, ids.Format("lab", req.Name)); err != nil {
			t.Fatalf("Delete: %v", err)
		}
	}
	for _, name := range volumeNames(t, l) {
		if strings.HasPrefix(name, req.Name) {
			t.Errorf("Delete left volume %s", name)
		}
	}
}

func volumeNames(t *testing.T, l lab) []string {
	t.Helper()
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	var names []string
	err = withPool(c, l.pool, func(pool *libvirt.StoragePool) error {
		if err := pool.Refresh(0); err != nil {
			return err
		}
		vols, err := pool.ListAllStorageVolumes(0)
		if err != nil {
			return err
		}
		for i := range vols {
			n, _ := vols[i].GetName()
			_ = vols[i].Free()
			names = append(names, n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// TestLifecycle boots the proxy guest image (LIBVIRT_TEST_IMAGE, built by
// make image) on the real daemon with the default proxy cloud-init: the
// domain runs with an address from the network, the proxy relays a
// request to an HTTP server on the network's host side (the default
// cloud-init disables tinyproxy's Via header, so the body is the proof),
// the instance is found by its marks, and Delete leaves no domain and no
// volume.
func TestLifecycle(t *testing.T) {
	l := realDaemon(t)
	image := os.Getenv("LIBVIRT_TEST_IMAGE")
	if image == "" {
		t.Skip("skipped: set LIBVIRT_TEST_IMAGE to the proxy guest image (make image prints its path)")
	}
	entry, _ := serveImage(t, image)
	p := labProvider(t, l, entry)
	name := fmt.Sprintf("egress-it-%d", time.Now().Unix()%1000000)
	userData, err := cloudinit.Render(cloudinit.Proxy{Hostname: name, Port: 3128, AllowedClients: []string{l.subnet}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !t.Failed() || l.logDir == "" {
			return
		}
		if b, err := os.ReadFile(filepath.Join(l.logDir, name+".serial.log")); err == nil {
			t.Logf("serial console of %s:\n%s", name, b)
		}
	})
	web, _ := startWebServer(t, l)
	start := time.Now()
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p,
		Request: contract.CreateRequest{
			Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-integration01", Owner: testOwner, Port: 3128,
			Placement: contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"},
			CloudInit: userData,
		},
		Timeout: 5 * time.Minute,
		Probe: func(ctx context.Context, ip string) error {
			t.Logf("Running with %s after %s", ip, time.Since(start).Round(time.Second))
			var last error
			for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
				out, err := l.inNamespace(ctx, "curl", "-sS", "-f", "-D", "-", "--max-time", "5", "-x", "http://"+ip+":3128", web).CombinedOutput()
				if err == nil && strings.Contains(string(out), "egress-lifecycle-ok") {
					t.Logf("proxied request answered after %s", time.Since(start).Round(time.Second))
					return nil
				}
				last = fmt.Errorf("%w: %s", err, out)
			}
			return last
		},
	})
	for _, v := range volumeNames(t, l) {
		if strings.HasPrefix(v, name) {
			t.Errorf("left behind: volume %s", v)
		}
	}
}

// startWebServer serves a file on the host side of the guests' network
// (the private namespace's bridge) and returns its URL, and its access
// log so far (python's http.server logs each request's client address).
func startWebServer(t *testing.T, l lab) (url string, accessLog func() string) {
	t.Helper()
	if l.ns == "" {
		t.Skip("skipped: the proxied request needs the private daemon's namespace (LIBVIRT_TEST_PRIVATE_DAEMON=1)")
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "hello.txt"), []byte("egress-lifecycle-ok\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(t.TempDir(), "access.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	cmd := l.inNamespace(t.Context(), "python3", "-m", "http.server", "--bind", l.hostIP, "--directory", dir, "8080")
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return "http://" + l.hostIP + ":8080/hello.txt", func() string {
		b, _ := os.ReadFile(logFile.Name())
		return string(b)
	}
}

// TestPrivateDaemonIsTheLanes: the tests' private daemon is the one the
// end-to-end lane starts (hack/e2e/libvirt-up.sh, one set-up for both):
// the URI, pool, network and subnet hack/e2e/env.sh names, and no other
// network than the lane's.
func TestPrivateDaemonIsTheLanes(t *testing.T) {
	l := privateDaemon(t)
	cmd := exec.CommandContext(t.Context(), "bash", "-c", `. ../../hack/e2e/env.sh && printf '%s\n' "$E2E_POOL" "$E2E_NET" "$E2E_SUBNET"`)
	cmd.Env = append(os.Environ(), "E2E_STATE=/nonexistent")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(out))
	if got := []string{l.pool, l.network, l.subnet}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("the tests' private daemon has pool, network, subnet %v; the lane's (hack/e2e/env.sh) %v", got, want)
	}
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	nets, err := c.ListNetworks()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(nets, " ") != l.network {
		t.Errorf("the private daemon knows networks %v, want only %s", nets, l.network)
	}
}
