package libvirt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
)

// A real libvirt daemon for the tests that need one (the volume upload
// stream, the lifecycle of a booted guest, a frozen daemon, the harness's
// rules a real daemon plays). Either an existing daemon named by
// LIBVIRT_TEST_URI (with LIBVIRT_TEST_POOL, LIBVIRT_TEST_NETWORK), or,
// with LIBVIRT_TEST_PRIVATE_DAEMON=1 and root, a private libvirtd and
// virtlogd in a network namespace of their own, started by the end-to-end
// lane's own script, hack/e2e/libvirt-up.sh (the one private-daemon
// set-up: state directories of its own bind-mounted over libvirt's, a NAT
// network and a directory pool; the root namespace's libvirt and networks
// are never touched, and libvirt's "default" network is unknown to the
// private daemon), with a state directory and namespace per test and no
// sshd. make test-integration-libvirt sets the latter.

// lab is a real daemon and where the provider works on it.
type lab struct {
	uri, pool, network string
	// ns is the private daemon's network namespace ("" for an existing
	// daemon); the guests' network exists only there.
	ns string
	// subnet is the private network's, for the proxy's allowed clients;
	// hostIP the network's address on the host side.
	subnet, hostIP string
	// logDir is where the private daemon logs the guests' serial consoles.
	logDir string
	// smallPool is a 16 MiB pool of the private daemon, for filling up.
	smallPool string
	// pidFile is the private libvirtd's pid file.
	pidFile string
}

func realDaemon(t *testing.T) lab {
	t.Helper()
	if uri := os.Getenv("LIBVIRT_TEST_URI"); uri != "" {
		return lab{uri: uri, pool: envOr("LIBVIRT_TEST_POOL", "default"), network: envOr("LIBVIRT_TEST_NETWORK", "default"),
			subnet: envOr("LIBVIRT_TEST_SUBNET", "192.168.122.0/24"), hostIP: envOr("LIBVIRT_TEST_HOST_IP", "192.168.122.1")}
	}
	return privateDaemon(t)
}

// privateDaemon starts a private daemon, or skips saying why it cannot.
func privateDaemon(t *testing.T) lab {
	t.Helper()
	if os.Getenv("LIBVIRT_TEST_PRIVATE_DAEMON") != "1" {
		t.Skip("skipped: no real libvirtd; set LIBVIRT_TEST_URI (and LIBVIRT_TEST_POOL, LIBVIRT_TEST_NETWORK), " +
			"or LIBVIRT_TEST_PRIVATE_DAEMON=1 as root for a private daemon in a network namespace (make test-integration-libvirt)")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: a private libvirtd in a network namespace needs root")
	}
	for _, bin := range []string{"libvirtd", "virtlogd", "virsh", "ip", "nsenter", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipped: %s is not installed (Debian: libvirt-daemon-system, libvirt-daemon-driver-qemu, libvirt-clients, qemu-system-x86, iproute2)", bin)
		}
	}
	hack, err := filepath.Abs(filepath.Join("..", "..", "hack", "e2e"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(hack, "libvirt-up.sh")); err != nil {
		t.Skip("skipped: hack/e2e/libvirt-up.sh, which starts the private daemon, is not beside this module (built from the module cache)")
	}
	return startPrivateDaemon(t, hack)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// shared is the private daemon of this test binary: started by the first
// test that needs one, used by every later one, stopped by TestMain.
// Starting one costs about a minute on the CI machines, nearly all of it
// libvirtd probing QEMU's capabilities (libvirt-up.sh's first virsh call),
// so each test starting its own would cost that again.
var shared struct {
	once sync.Once
	lab  lab
	err  error
	stop func()
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.stop != nil {
		shared.stop()
	}
	os.Exit(code)
}

func startPrivateDaemon(t *testing.T, hack string) lab {
	t.Helper()
	shared.once.Do(func() {
		start := time.Now()
		shared.lab, shared.stop, shared.err = upPrivateDaemon(hack)
		if shared.err == nil {
			t.Logf("private libvirtd up in %s (%s)", shared.lab.ns, time.Since(start).Round(time.Millisecond))
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.lab
}

// upPrivateDaemon runs hack/e2e/libvirt-up.sh with a state directory
// and network namespace of the test binary's own, reads the daemon's
// URI, pool, network and addresses from hack/e2e/env.sh, and adds what
// only the tests need: a 16 MiB tmpfs pool mounted in the daemon's own
// mount namespace. stop runs hack/e2e/libvirt-down.sh.
func upPrivateDaemon(hack string) (l lab, stop func(), err error) {
	// Short: the daemon's socket path must fit a sockaddr_un.
	dir, err := os.MkdirTemp("", "eplv-")
	if err != nil {
		return lab{}, nil, err
	}
	ns := filepath.Base(dir)
	// LIBVIRT_TEST_PRIVATE_STATE names a daemon libvirt-up.sh started
	// already (E2E_STATE, with E2E_NETNS its base name): the tests reuse
	// it and leave it running, which saves its start while iterating.
	reuse := os.Getenv("LIBVIRT_TEST_PRIVATE_STATE")
	if reuse != "" {
		_ = os.Remove(dir)
		dir, ns = reuse, filepath.Base(reuse)
	}
	env := append(os.Environ(), "E2E_STATE="+dir, "E2E_NETNS="+ns, "E2E_SSH=0")
	script := func(name string) *exec.Cmd {
		cmd := exec.CommandContext(context.Background(), filepath.Join(hack, name))
		cmd.Env = env
		return cmd
	}
	stop = func() {}
	if reuse == "" {
		stop = func() {
			if out, err := runLogged(script("libvirt-down.sh")); err != nil {
				fmt.Fprintf(os.Stderr, "libvirt-down.sh: %v\n%s", err, out)
			}
		}
		if out, err := runLogged(script("libvirt-up.sh")); err != nil {
			stop()
			return lab{}, nil, fmt.Errorf("libvirt-up.sh: %w\n%s", err, out)
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	cmd := exec.CommandContext(context.Background(), "bash", "-c", `. "$1/env.sh" && printf '%s\n' "$E2E_URI" "$E2E_POOL" "$E2E_NET" "$E2E_SUBNET" "$E2E_HOST_IP"`, "sh", hack)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return lab{}, nil, err
	}
	v := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(v) != 5 {
		return lab{}, nil, fmt.Errorf("hack/e2e/env.sh gave %q", out)
	}
	l = lab{uri: v[0], pool: v[1], network: v[2], subnet: v[3], hostIP: v[4], ns: ns,
		logDir: filepath.Join(dir, "serial"), smallPool: "egress-small", pidFile: filepath.Join(dir, "lv", "run", "libvirtd.pid")}
	small := filepath.Join(dir, "small")
	if reuse != "" {
		return l, stop, nil
	}
	for _, d := range []string{l.logDir, small} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return lab{}, nil, err
		}
	}
	pid, err := l.daemonPID()
	if err != nil {
		return lab{}, nil, err
	}
	// A 16 MiB tmpfs, mounted only in the daemon's mount namespace: a pool
	// that fills up without touching the machine's disks.
	if out, err := exec.CommandContext(context.Background(), "nsenter", "-t", strconv.Itoa(pid), "-m",
		"mount", "-t", "tmpfs", "-o", "size=16m", "egress-small", small).CombinedOutput(); err != nil {
		return lab{}, nil, fmt.Errorf("mount the small pool's tmpfs: %w %s", err, out)
	}
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		return lab{}, nil, err
	}
	defer func() { _, _ = c.Close() }()
	pool, err := c.StoragePoolDefineXML(fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, l.smallPool, small), 0)
	if err != nil {
		return lab{}, nil, err
	}
	defer func() { _ = pool.Free() }()
	if err := pool.Create(0); err != nil {
		return lab{}, nil, err
	}
	return l, stop, nil
}

// runLogged runs cmd with its output in a file and returns the output:
// the daemons libvirt-up.sh starts inherit the script's stdout and
// stderr, so a pipe (CombinedOutput) would stay open, and the call wait,
// until they close them (about 50 s after they start).
func runLogged(cmd *exec.Cmd) ([]byte, error) {
	f, err := os.CreateTemp("", "eplv-log-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.Remove(f.Name()); _ = f.Close() }()
	cmd.Stdout, cmd.Stderr = f, f
	err = cmd.Run()
	out, _ := os.ReadFile(f.Name())
	return out, err
}

// daemonPID is the private libvirtd's process id.
func (l lab) daemonPID() (int, error) {
	b, err := os.ReadFile(l.pidFile)
	if err != nil {
		return 0, fmt.Errorf("the private libvirtd's pid: %w", err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// freeze stops the private libvirtd with SIGSTOP, as a hung daemon (or a
// host that went away without closing its connections) looks to a
// client: the socket accepts what is sent and nothing answers. thaw
// continues it; cleanup thaws it in any case.
func (l lab) freeze(t *testing.T) (thaw func()) {
	t.Helper()
	if l.pidFile == "" {
		t.Skip("skipped: freezing the daemon needs the private one (LIBVIRT_TEST_PRIVATE_DAEMON=1)")
	}
	pid, err := l.daemonPID()
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	thaw = func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	t.Cleanup(thaw)
	return thaw
}

// inNamespace runs a command in the lab's network namespace (the host
// side of the guests' network), or here for an existing daemon.
func (l lab) inNamespace(ctx context.Context, args ...string) *exec.Cmd {
	if l.ns == "" {
		return exec.CommandContext(ctx, args[0], args[1:]...)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.ns}, args...)...)
}
