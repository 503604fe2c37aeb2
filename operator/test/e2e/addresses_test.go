//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// poolName is the lane's AddressPool.
const poolName = "e2e-lane"

// applyAddressPool creates the lane's AddressPool: three addresses of the
// VM network at .50–.52, below the range the network's dnsmasq hands out
// (.100–.200, hack/e2e/libvirt-up.sh), so no lease can ever collide with
// them; the bridge is the gateway and the resolver (libvirt's dnsmasq
// answers DNS there).
func applyAddressPool(ctx context.Context, t *testing.T, k8s client.Client, l lane) *v1alpha1.AddressPool {
	t.Helper()
	subnet, err := netip.ParsePrefix(l.Subnet)
	if err != nil || !subnet.Addr().Is4() {
		t.Fatalf("E2E_SUBNET %q: not an IPv4 prefix (%v)", l.Subnet, err)
	}
	nth := func(n byte) string {
		a := subnet.Masked().Addr().As4()
		a[3] += n
		return netip.AddrFrom4(a).String()
	}
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: poolName},
		Spec: v1alpha1.AddressPoolSpec{
			Provider:  providerName,
			Region:    region,
			Addresses: []v1alpha1.PoolAddresses{v1alpha1.PoolAddresses(nth(50) + "-" + nth(52))},
			Prefix:    int32(subnet.Bits()),
			Gateway:   v1alpha1.IPv4(l.HostIP),
			DNS:       []v1alpha1.IPv4{v1alpha1.IPv4(l.HostIP)},
		},
	}
	if err := k8s.Create(ctx, pool); err != nil {
		t.Fatalf("create the AddressPool: %v", err)
	}
	return pool
}

// waitAllocated polls the Proxy, every 50 ms, until its status shows an
// allocated address, and returns the Proxy as read then.
func waitAllocated(ctx context.Context, t *testing.T, k8s client.Client, key client.ObjectKey, limit time.Duration) *v1alpha1.Proxy {
	t.Helper()
	var p v1alpha1.Proxy
	within(t, limit, 50*time.Millisecond, "the Proxy "+key.String()+" shows an allocated address", func() (bool, string) {
		if err := k8s.Get(ctx, key, &p); err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		return len(p.Status.Addresses) > 0, fmt.Sprintf("%+v", p.Status)
	})
	return &p
}

// proxyAddressName is the ProxyAddress an address of the lane's pool is
// held by: <provider>-a-b-c-d (docs/addresses.md).
func proxyAddressName(addr string) string {
	return providerName + "-" + strings.ReplaceAll(addr, ".", "-")
}

// checkProxyAddress requires the ProxyAddress of addr, the allocation
// users see in `kubectl get proxyaddresses`, to hold addr with the lane's
// prefix for the Proxy, and returns it.
func checkProxyAddress(ctx context.Context, t *testing.T, k8s client.Client, l lane, p *v1alpha1.Proxy, addr string) *v1alpha1.ProxyAddress {
	t.Helper()
	name := proxyAddressName(addr)
	var pa v1alpha1.ProxyAddress
	if err := k8s.Get(ctx, client.ObjectKey{Name: name}, &pa); err != nil {
		t.Fatalf("the ProxyAddress %s of %s: %v", name, addr, err)
	}
	want := v1alpha1.ProxyRef{Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
	prefix := netip.MustParsePrefix(l.Subnet)
	if s := pa.Spec; s.Address != netip.PrefixFrom(netip.MustParseAddr(addr), prefix.Bits()).String() || s.Pool != poolName || s.Proxy != want {
		t.Errorf("the ProxyAddress %s: address %s, pool %s, proxy %+v; want %s/%d, %s, %+v",
			name, s.Address, s.Pool, s.Proxy, addr, prefix.Bits(), poolName, want)
	}
	return &pa
}

// checkStaticOnDomain checks the domain has exactly the static address and
// took no DHCP lease: its guest agent reports addr, and the network's
// dnsmasq has no lease for the domain's MAC nor for addr.
func checkStaticOnDomain(t *testing.T, l lane, domain, addr string) {
	t.Helper()
	ifaddrs := virsh(t, l, "domifaddr", domain, "--source", "agent")
	if !strings.Contains(ifaddrs, " "+addr+"/") {
		t.Errorf("the guest agent of %s reports no %s:\n%s", domain, addr, ifaddrs)
	}
	var macs []string
	for line := range strings.Lines(virsh(t, l, "domiflist", domain)) {
		if f := strings.Fields(line); len(f) >= 5 {
			macs = append(macs, f[4])
		}
	}
	if len(macs) == 0 {
		t.Errorf("domain %s has no interface", domain)
	}
	leases := virsh(t, l, "net-dhcp-leases", l.Network)
	for _, mac := range macs {
		if strings.Contains(leases, mac) {
			t.Errorf("the network %s has a DHCP lease for %s's MAC %s:\n%s", l.Network, domain, mac, leases)
		}
	}
	if strings.Contains(leases, " "+addr+"/") {
		t.Errorf("the network %s has a DHCP lease of the static address %s:\n%s", l.Network, addr, leases)
	}
	t.Logf("domain %s (MAC %v): the agent reports %s; no lease for it (leases: %q)", domain, macs, addr, strings.TrimSpace(leases))
}

// waitReleasedAfterVM follows a deleted Proxy's domain and ProxyAddress
// until both are gone, reading the ProxyAddress first and the domains
// second on each pass: a pass that finds the ProxyAddress gone and the
// domain still defined saw the address released while a VM held it. It
// returns when each was first seen gone.
func waitReleasedAfterVM(t *testing.T, k8s client.Client, l lane, paName, domain string, limit time.Duration) (vmGone, released time.Time) {
	t.Helper()
	within(t, limit, 200*time.Millisecond, "the domain "+domain+" and then the ProxyAddress "+paName+" are gone", func() (bool, string) {
		err := k8s.Get(t.Context(), client.ObjectKey{Name: paName}, &v1alpha1.ProxyAddress{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get the ProxyAddress %s: %v", paName, err)
		}
		paGone := apierrors.IsNotFound(err)
		vmThere := slices.Contains(domains(t, l), domain)
		now := time.Now()
		if paGone && released.IsZero() {
			released = now
			if vmThere {
				t.Errorf("the ProxyAddress %s was released while the domain %s was still defined", paName, domain)
			}
		}
		if !vmThere && vmGone.IsZero() {
			vmGone = now
		}
		return paGone && !vmThere, fmt.Sprintf("ProxyAddress gone: %t, domain defined: %t", paGone, vmThere)
	})
	return vmGone, released
}
