package libvirt

import (
	"context"
	"errors"
	"strings"
	"testing"

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
