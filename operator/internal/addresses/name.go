package addresses

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// Name is the ProxyAddress's name for an address of a provider
// entry's pools: <provider>-192-0-2-10. Two pools of the entry that both
// hand out the address meet at this one name (overlap.go). Earlier
// releases named it after the pool; those are found by their address
// (holders), not by name.
func Name(provider string, a netip.Addr) string {
	return provider + "-" + strings.ReplaceAll(a.String(), ".", "-")
}

// NetworkOf reads a ProxyAddress as the network a VM is given, checked as
// every provider checks it.
func NetworkOf(pa *v1alpha1.ProxyAddress) (contract.StaticNetwork, error) {
	var n contract.StaticNetwork
	var err error
	if n.Address, err = netip.ParsePrefix(pa.Spec.Address); err != nil {
		return n, fmt.Errorf("spec.address: %q is not an address with its prefix length", pa.Spec.Address)
	}
	if n.Gateway, err = netip.ParseAddr(pa.Spec.Gateway); err != nil {
		return n, fmt.Errorf("spec.gateway: %q is not an IP address", pa.Spec.Gateway)
	}
	for i, d := range pa.Spec.DNS {
		a, err := netip.ParseAddr(d)
		if err != nil {
			return n, fmt.Errorf("spec.dns[%d]: %q is not an IP address", i, d)
		}
		n.DNS = append(n.DNS, a)
	}
	return n, n.Validate()
}

// IPOf is the IP of a recorded address (a prefix, as ProxyAddresses and
// InstanceRefs hold it): "" for none.
func IPOf(address string) string {
	p, err := netip.ParsePrefix(address)
	if err != nil {
		return ""
	}
	return p.Addr().String()
}
