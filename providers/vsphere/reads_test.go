package vsphere

import (
	"bytes"
	"context"
	"encoding/base64"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// retrievals records the answers to the property collector's retrievals
// that pass the front while it is set.
type retrievals struct {
	mu      sync.Mutex
	answers [][]byte
}

// watch sets the front's tap to record every retrieval's answer until the
// returned function is called.
func (r *retrievals) watch(v *vcsim) (stop func()) {
	tap := func(call, answer []byte) {
		if !bytes.Contains(call, []byte("RetrievePropertiesEx")) && !bytes.Contains(call, []byte("<RetrieveProperties ")) {
			return
		}
		r.mu.Lock()
		r.answers = append(r.answers, bytes.Clone(answer))
		r.mu.Unlock()
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

func (r *retrievals) take() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.answers
	r.answers = nil
	return out
}

// TestReadsLeaveTheCloudInit: Get and ListByTag read the marks of a VM,
// never the rest of its extraConfig, where the cloud-init lives (up to
// 87 KiB of base64 a VM: tens of MB a sweep at 1,000 VMs when lists read
// it all). The answers vcsim gives to the retrievals of each read must
// carry the VM's Owner and UID and none of its user-data.
func TestReadsLeaveTheCloudInit(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	cloudInit := bytes.Repeat([]byte("#cloud-config\n# read-sentinel-5e1f\n"), MaxCloudInit/36)
	inst, err := p.Create(ctx, contract.CreateRequest{
		Name: "big", UID: "uid-big", Owner: testOwner, CloudInit: cloudInit, Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatal(err)
	}
	userdata := []byte(base64.StdEncoding.EncodeToString(cloudInit))[:64]

	var r retrievals
	defer r.watch(v)()
	for _, read := range []struct {
		name string
		run  func() ([]contract.Instance, error)
	}{
		{"Get", func() ([]contract.Instance, error) {
			got, err := p.Get(ctx, inst.ProviderID)
			return []contract.Instance{got}, err
		}},
		{"ListByTag(managed)", func() ([]contract.Instance, error) { return p.ListByTag(ctx, contract.LabelManaged, testOwner) }},
		{"ListByTag(uid)", func() ([]contract.Instance, error) { return p.ListByTag(ctx, contract.LabelUID, "uid-big") }},
	} {
		got, err := read.run()
		if err != nil {
			t.Fatalf("%s: %v", read.name, err)
		}
		if len(got) != 1 || got[0].UID != "uid-big" || got[0].Owner != testOwner {
			t.Errorf("%s = %+v, want the VM with its UID and Owner", read.name, got)
		}
		answers := r.take()
		if len(answers) == 0 {
			t.Fatalf("%s: no retrieval passed the front", read.name)
		}
		var all []byte
		for _, a := range answers {
			all = append(all, a...)
		}
		// The answers are read as sent: the Owner must be in them, or the
		// check below would pass on bytes it cannot read.
		if !bytes.Contains(all, []byte(testOwner)) {
			t.Fatalf("%s: the retrievals' answers do not carry the Owner %q: the tap cannot read them", read.name, testOwner)
		}
		for _, leak := range [][]byte{userdata, []byte("guestinfo.userdata"), []byte("guestinfo.metadata")} {
			if bytes.Contains(all, leak) {
				t.Errorf("%s retrieved %q: %d bytes in %d answers carry the VM's cloud-init", read.name, leak[:min(len(leak), 24)], len(all), len(answers))
				break
			}
		}
	}
}
