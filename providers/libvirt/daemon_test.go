package libvirt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
)

// A real libvirt daemon for the tests that need one (the volume upload
// stream and the lifecycle of a booted guest). Either an existing daemon
// named by LIBVIRT_TEST_URI (with LIBVIRT_TEST_POOL, LIBVIRT_TEST_NETWORK),
// or, with LIBVIRT_TEST_PRIVATE_DAEMON=1 and root, a private libvirtd and
// virtlogd the test starts in a network namespace it creates, with state
// directories of its own bind-mounted over libvirt's (the recipe of
// shared/notes/real-vm-e2e.md §3): the root namespace's libvirt and
// networks are never touched, and libvirt's "default" network is unknown
// to the private daemon. make test-integration-libvirt sets the latter.

// lab is a real daemon and where the provider works on it.
type lab struct {
	uri, pool, network string
	// ns is the private daemon's network namespace ("" for an existing
	// daemon); the guests' network exists only there.
	ns string
	// subnet is the private network's, for the proxy's allowed clients.
	subnet string
	// logDir is where the private daemon logs the guests' serial consoles.
	logDir string
	// smallPool is a 16 MiB pool of the private daemon, for filling up.
	smallPool string
}

func realDaemon(t *testing.T) lab {
	t.Helper()
	if uri := os.Getenv("LIBVIRT_TEST_URI"); uri != "" {
		return lab{uri: uri, pool: envOr("LIBVIRT_TEST_POOL", "default"), network: envOr("LIBVIRT_TEST_NETWORK", "default"),
			subnet: envOr("LIBVIRT_TEST_SUBNET", "192.168.122.0/24")}
	}
	if os.Getenv("LIBVIRT_TEST_PRIVATE_DAEMON") != "1" {
		t.Skip("skipped: no real libvirtd; set LIBVIRT_TEST_URI (and LIBVIRT_TEST_POOL, LIBVIRT_TEST_NETWORK), " +
			"or LIBVIRT_TEST_PRIVATE_DAEMON=1 as root for a private daemon in a network namespace (make test-integration-libvirt)")
	}
	if os.Geteuid() != 0 {
		t.Skip("skipped: a private libvirtd in a network namespace needs root")
	}
	for _, bin := range []string{"libvirtd", "virtlogd", "ip", "qemu-system-x86_64"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("skipped: %s is not installed (Debian: libvirt-daemon-system, libvirt-daemon-driver-qemu, qemu-system-x86, iproute2)", bin)
		}
	}
	return startPrivateDaemon(t)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// startPrivateDaemon starts libvirtd and virtlogd in a new network
// namespace and makes a directory pool and a NAT network there. Cleanup
// destroys every domain, stops the daemons and removes the namespace.
func startPrivateDaemon(t *testing.T) lab {
	t.Helper()
	// Short: the daemon's socket path must fit a sockaddr_un.
	dir, err := os.MkdirTemp("", "eplv-")
	if err != nil {
		t.Fatal(err)
	}
	ns := filepath.Base(dir)
	l := lab{uri: "qemu:///system?socket=" + dir + "/run/libvirt-sock", pool: "egress", network: "egress-net", ns: ns,
		subnet: "192.168.151.0/24", logDir: dir + "/serial", smallPool: "egress-small"}
	sh := func(script string) {
		t.Helper()
		if out, err := exec.CommandContext(t.Context(), "sh", "-ec", script).CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", script, err, out)
		}
	}
	sh(fmt.Sprintf(`cd %[1]s
cp -a /etc/libvirt etc
rm -f etc/qemu/networks/default.xml etc/qemu/networks/autostart/default.xml
cat >> etc/qemu.conf <<'EOF'
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
EOF
mkdir -p run lib cache log pool serial small`, dir))
	t.Cleanup(func() { stopPrivateDaemon(t, l, dir) })
	sh(fmt.Sprintf(`ip netns add %[2]s
ip -n %[2]s link set lo up
ip netns exec %[2]s sh -ec '
  mount --bind %[1]s/etc /etc/libvirt; mount --bind %[1]s/run /run/libvirt
  mount --bind %[1]s/lib /var/lib/libvirt; mount --bind %[1]s/cache /var/cache/libvirt
  mount --bind %[1]s/log /var/log/libvirt
  mount -t tmpfs -o size=16m egress-small %[1]s/small
  virtlogd -d -p /run/libvirt/virtlogd.pid
  libvirtd -d -p /run/libvirt/libvirtd.pid'`, dir, ns))
	var c *libvirt.Connect
	for start := time.Now(); ; time.Sleep(100 * time.Millisecond) {
		if c, err = libvirt.NewConnect(l.uri); err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the private libvirtd did not answer within 30 s: %v", err)
		}
	}
	defer func() { _, _ = c.Close() }()
	pool, err := c.StoragePoolDefineXML(fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s/pool</path></target></pool>`, l.pool, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pool.Free() }()
	if err := pool.Create(0); err != nil {
		t.Fatal(err)
	}
	// A 16 MiB tmpfs, mounted only in the daemon's mount namespace: a pool
	// that fills up without touching the machine's disks.
	small, err := c.StoragePoolDefineXML(fmt.Sprintf(`<pool type='dir'><name>egress-small</name><target><path>%s/small</path></target></pool>`, dir), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = small.Free() }()
	if err := small.Create(0); err != nil {
		t.Fatal(err)
	}
	network, err := c.NetworkDefineXML(fmt.Sprintf(`<network><name>%s</name><forward mode='nat'/><bridge name='eplvbr0' stp='on' delay='0'/>
<ip address='192.168.151.1' netmask='255.255.255.0'><dhcp><range start='192.168.151.100' end='192.168.151.200'/></dhcp></ip></network>`, l.network))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = network.Free() }()
	if err := network.Create(); err != nil {
		t.Fatal(err)
	}
	return l
}

// stopPrivateDaemon destroys what the daemon runs, stops the daemons this
// test started (by their pid files) and removes the namespace and files.
func stopPrivateDaemon(t *testing.T, l lab, dir string) {
	if c, err := libvirt.NewConnect(l.uri); err == nil {
		if doms, err := c.ListAllDomains(libvirt.CONNECT_LIST_DOMAINS_ACTIVE); err == nil {
			for i := range doms {
				_ = doms[i].Destroy()
				_ = doms[i].Free()
			}
		}
		if n, err := c.LookupNetworkByName(l.network); err == nil {
			_ = n.Destroy()
			_ = n.Free()
		}
		_, _ = c.Close()
	}
	for _, name := range []string{"libvirtd", "virtlogd"} {
		b, err := os.ReadFile(filepath.Join(dir, "run", name+".pid"))
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(50 * time.Millisecond)
			}
		}
	}
	// t.Context is already done in a cleanup.
	if out, err := exec.CommandContext(context.Background(), "ip", "netns", "del", l.ns).CombinedOutput(); err != nil {
		t.Logf("ip netns del %s: %v %s", l.ns, err, out)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Logf("remove %s: %v", dir, err)
	}
}

// inNamespace runs a command in the lab's network namespace (the host
// side of the guests' network), or here for an existing daemon.
func (l lab) inNamespace(ctx context.Context, args ...string) *exec.Cmd {
	if l.ns == "" {
		return exec.CommandContext(ctx, args[0], args[1:]...)
	}
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", l.ns}, args...)...)
}
