package libvirt

import (
	"crypto/sha256"
	"fmt"
	"net/netip"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/nocloud"
)

// A static address (contract §2.2) reaches the guest as the seed's
// network-config, which cloud-init applies to the NIC whose MAC it
// matches; the address is recorded in the marks (<address>), so every
// provider, a restarted one too, knows which address the guest must
// report before the domain counts as Running.

// staticMAC is the MAC of the NIC of an instance with a static address:
// chosen by the provider, not by libvirt, because the seed that names it
// is written before the domain is defined (Create step 3), and must be
// the same when a cut-off Create rebuilds it. It is derived from the UID
// and name, so a resumed Create gives the same one and another instance
// (another Proxy, or the replacement of this one) another. The prefix is
// the one libvirt's QEMU driver gives the MACs it generates itself
// (52:54:00, QEMU's OUI): the remaining 24 bits collide between two NICs
// of one network as rarely as libvirt's random ones do.
func staticMAC(uid, name string) string {
	sum := sha256.Sum256([]byte(uid + "/" + name))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", sum[0], sum[1], sum[2])
}

// networkConfig is the seed's network-config for req, nil without a
// static network (the image's own DHCP, as before contract v0.4.0).
func networkConfig(req contract.CreateRequest) ([]byte, error) {
	if req.Network == nil {
		return nil, nil
	}
	return nocloud.NetworkConfig(*req.Network, staticMAC(req.UID, req.Name))
}

// addressPick chooses the address a running domain is reported at from
// what its address sources report, source by source in the configured
// order. Without a static address the first source with a routable IPv4
// wins, as before; with one, only exactly that address does, from any
// source, and the first routable IPv4 reported instead is kept for the
// Message.
type addressPick struct {
	want, ip, seen string
}

// offer takes one source's addresses and says whether the choice is made.
func (a *addressPick) offer(ips []string) bool {
	first := contract.FirstRoutableIPv4(ips)
	if a.want == "" {
		a.ip = first
		return first != ""
	}
	for _, s := range ips {
		if ip, err := netip.ParseAddr(s); err == nil && ip.Unmap().String() == a.want {
			a.ip = a.want
			return true
		}
	}
	if a.seen == "" {
		a.seen = first
	}
	return false
}

// waiting is the Message of a running domain whose guest has not reported
// its static address.
func waiting(want, seen string) string {
	if seen == "" {
		seen = "none yet"
	}
	return fmt.Sprintf("waiting for the guest to report its static address %s; it reports %s", want, seen)
}
