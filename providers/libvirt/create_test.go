package libvirt

import (
	"context"
	"errors"
	"strings"
	"testing"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// A Create that fails after its volumes were made (the define refused)
// deletes them: volumes without a domain are found by no list, so the
// finalizer and the garbage collector would never see them.
func TestFailedDefineLeavesNoVolumes(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	ctl := control{b}
	b.mu.Lock()
	b.faults["DefineDomain"] = []error{b.provoke(contract.ErrPermanent)}
	b.mu.Unlock()
	req := contract.CreateRequest{Name: "egress-define-fails", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000bb", Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	if _, err := p.Create(context.Background(), req); !errors.Is(err, contract.ErrPermanent) {
		t.Fatalf("Create with the define refused = %v, want ErrPermanent", err)
	}
	left, err := ctl.Resources(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range left {
		if strings.Contains(r, req.Name) {
			t.Errorf("left behind: %s", r)
		}
	}
}

// A start that loses the race with another Create (the domain runs by the
// time this one's start arrives) is success; the daemon's error for it is
// the one ERR_OPERATION_INVALID and ERR_INTERNAL_ERROR also carry for real
// failures, so only the domain's state can tell (a real failure:
// CreateResumesAfterFailure).
func TestStartLosingARaceIsDone(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	req := contract.CreateRequest{Name: "egress-start-race", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000cc", Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	id, err := control{b}.CreateUnstarted(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), id) })
	d, err := p.lookup(context.Background(), testRegion, req.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := withDomain(b.conns[testRegion], req.Name, func(dom *libvirt.Domain) error { return dom.Create() }); err != nil {
		t.Fatal(err)
	}
	if err := p.start(context.Background(), testRegion, d); err != nil {
		t.Errorf("start of a domain another Create started meanwhile = %v, want nil", err)
	}
}
