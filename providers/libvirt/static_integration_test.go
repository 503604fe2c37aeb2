package libvirt

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
)

// TestStaticAddressLifecycle boots the proxy guest image
// (LIBVIRT_TEST_IMAGE) with a static address in the private network,
// outside its DHCP range (hack/e2e/libvirt-up.sh: .100–.200), and checks
// on the real guest that it has exactly the address asked for:
//   - Get says Running with it;
//   - the proxy answers on it, and the web server on the network's host
//     side sees the proxied request come from it;
//   - the guest's own view (the agent's guest-exec): eth0 holds the
//     address with its prefix, the default route goes through the
//     gateway, resolv.conf names the resolver;
//   - a client outside the guest's subnet (hack/e2e/env.sh's
//     E2E_OUTSIDE_IP, on the bridge) reaches the proxy and is refused by
//     its ACL, which it can only through the default route;
//   - the network's DHCP server never leased the NIC an address.
//
// LIBVIRT_TEST_STATIC_ADDRESS overrides the address (with its prefix
// length) for a daemon of LIBVIRT_TEST_URI whose network has another
// DHCP range.
func TestStaticAddressLifecycle(t *testing.T) {
	l := realDaemon(t)
	image := os.Getenv("LIBVIRT_TEST_IMAGE")
	if image == "" {
		t.Skip("skipped: set LIBVIRT_TEST_IMAGE to the proxy guest image (make image prints its path)")
	}
	subnet := netip.MustParsePrefix(l.subnet)
	gateway := netip.MustParseAddr(l.hostIP)
	base := subnet.Addr().As4()
	base[3] += 50
	address := netip.PrefixFrom(netip.AddrFrom4(base), subnet.Bits())
	if s := os.Getenv("LIBVIRT_TEST_STATIC_ADDRESS"); s != "" {
		address = netip.MustParsePrefix(s)
	}
	network := contract.StaticNetwork{Address: address, Gateway: gateway, DNS: []netip.Addr{gateway}}
	want := network.IP()

	entry, _ := serveImage(t, image)
	p := labProvider(t, l, entry)
	name := fmt.Sprintf("egress-static-%d", time.Now().Unix()%1000000)
	uid := "0e9d6c1a-7f3b-4d2e-9a5c-integration02"
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
	web, accessLog := startWebServer(t, l)
	start := time.Now()
	contracttest.RunLifecycle(t, contracttest.Lifecycle{
		Provider: p,
		Request: contract.CreateRequest{
			Name: name, UID: uid, Owner: testOwner, Port: 3128,
			Placement: contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"},
			CloudInit: userData, Network: &network,
		},
		Timeout: 5 * time.Minute,
		Probe: func(ctx context.Context, ip string) error {
			t.Logf("Running with %s after %s", ip, time.Since(start).Round(time.Second))
			if ip != want {
				return fmt.Errorf("Running with %s, want exactly the static address %s", ip, want)
			}
			if err := proxied(ctx, l, ip, web); err != nil {
				return err
			}
			t.Logf("proxied request answered after %s", time.Since(start).Round(time.Second))
			// The harness's reading of the seed (the controls'
			// NetworkReader) is what this guest has: the parser is held to
			// a real cloud-init.
			if got, err := seedNetwork(t, l, name); err != nil || !reflect.DeepEqual(got, network) {
				t.Errorf("the NetworkReader reads %+v, %v from the seed; the guest has the request's %+v", got, err, network)
			}
			if log := accessLog(); !strings.Contains(log, want+" - - ") {
				return fmt.Errorf("the web server did not see a request from %s:\n%s", want, log)
			}
			view, err := guestExec(ctx, l.uri, name, "ip -4 -o addr show dev eth0; ip -4 route show default; cat /etc/resolv.conf")
			if err != nil {
				return fmt.Errorf("the guest's own view: %w", err)
			}
			t.Logf("the guest's own view:\n%s", view)
			for _, s := range []string{"inet " + address.String() + " ", "default via " + gateway.String() + " dev eth0", "nameserver " + gateway.String()} {
				if !strings.Contains(view, s) {
					t.Errorf("the guest's own view lacks %q", s)
				}
			}
			if code, err := outsideClient(ctx, l, ip, web); err != nil || code != "403" {
				t.Errorf("a client outside the subnet through the proxy at %s: HTTP %q, %v; want the proxy's 403 (it answers only through its default route)", ip, code, err)
			}
			if leased := leasesFor(t, l, staticMAC(uid, name)); len(leased) > 0 {
				t.Errorf("the network's DHCP server leased %v to the NIC of a guest with a static address", leased)
			}
			return nil
		},
	})
}

// seedNetwork is the NetworkReader's reading of the lab domain's seed.
func seedNetwork(t *testing.T, l lab, name string) (contract.StaticNetwork, error) {
	t.Helper()
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	defer func() { _, _ = c.Close() }()
	b := &testBackend{conns: map[string]*libvirt.Connect{"lab": c}}
	return b.delivered(ids.Format("lab", name), download(t, l.uri, l.pool, seedName(name)))
}

// proxied fetches url through the proxy at ip from the private namespace
// until the body arrives, for at most two minutes (the proxy starts after
// the address is up).
func proxied(ctx context.Context, l lab, ip, url string) error {
	var last error
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(time.Second) {
		out, err := l.inNamespace(ctx, "curl", "-sS", "-f", "--max-time", "5", "-x", "http://"+ip+":3128", url).CombinedOutput()
		if err == nil && strings.Contains(string(out), "egress-lifecycle-ok") {
			return nil
		}
		last = fmt.Errorf("%w: %s", err, out)
	}
	return last
}

// outsideClient asks the proxy at ip for url from hack/e2e/env.sh's
// E2E_OUTSIDE_IP and returns the HTTP status.
func outsideClient(ctx context.Context, l lab, ip, url string) (string, error) {
	cmd := exec.CommandContext(ctx, "bash", "-c", `. ../../hack/e2e/env.sh && echo "$E2E_OUTSIDE_IP"`)
	cmd.Env = append(os.Environ(), "E2E_STATE=/nonexistent")
	out, err := cmd.Output()
	if err != nil {
		return "", err
	}
	code, err := l.inNamespace(ctx, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
		"--interface", strings.TrimSpace(string(out)), "-x", "http://"+ip+":3128", url).Output()
	return string(code), err
}

// leasesFor lists the addresses the lab network's DHCP server leased to
// the MAC.
func leasesFor(t *testing.T, l lab, mac string) []string {
	t.Helper()
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	net, err := c.LookupNetworkByName(l.network)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = net.Free() }()
	leases, err := net.GetDHCPLeases()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, lease := range leases {
		if strings.EqualFold(lease.Mac, mac) {
			out = append(out, lease.IPaddr)
		}
	}
	return out
}

// guestExec runs a shell command in the guest through its agent
// (guest-exec and guest-exec-status of qemu-guest-agent,
// https://www.qemu.org/docs/master/interop/qemu-ga-ref.html) with virsh,
// and returns its output.
func guestExec(ctx context.Context, uri, domain, script string) (string, error) {
	agent := func(cmd any) (json.RawMessage, error) {
		doc, _ := json.Marshal(cmd)
		out, err := exec.CommandContext(ctx, "virsh", "-c", uri, "qemu-agent-command", domain, string(doc)).CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("virsh qemu-agent-command: %w: %s", err, out)
		}
		var r struct {
			Return json.RawMessage `json:"return"`
		}
		return r.Return, json.Unmarshal(out, &r)
	}
	ret, err := agent(map[string]any{"execute": "guest-exec", "arguments": map[string]any{
		"path": "/bin/sh", "arg": []string{"-c", script}, "capture-output": true}})
	if err != nil {
		return "", err
	}
	var started struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(ret, &started); err != nil {
		return "", err
	}
	for range 30 {
		ret, err := agent(map[string]any{"execute": "guest-exec-status", "arguments": map[string]any{"pid": started.PID}})
		if err != nil {
			return "", err
		}
		var status struct {
			Exited bool   `json:"exited"`
			Out    string `json:"out-data"`
			Err    string `json:"err-data"`
		}
		if err := json.Unmarshal(ret, &status); err != nil {
			return "", err
		}
		if status.Exited {
			out, _ := base64.StdEncoding.DecodeString(status.Out)
			errOut, _ := base64.StdEncoding.DecodeString(status.Err)
			return string(out) + string(errOut), nil
		}
		time.Sleep(time.Second)
	}
	return "", fmt.Errorf("guest-exec of %q did not finish in 30 s", script)
}
