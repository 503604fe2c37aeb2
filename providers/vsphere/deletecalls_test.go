package vsphere

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// soapMethodRE finds a SOAP call's method: the first element in the Body.
var soapMethodRE = regexp.MustCompile(`<(?:\w+:)?Body[^>]*>\s*<(?:\w+:)?(\w+)`)

// methodLog records the SOAP methods that pass the front while it is set.
type methodLog struct {
	mu      sync.Mutex
	methods []string
}

func (l *methodLog) watch(v *vcsim) (stop func()) {
	var tap tapFunc = func(_ *http.Request, call, _ []byte) {
		m := "?"
		if s := soapMethodRE.FindSubmatch(call); s != nil {
			m = string(s[1])
		}
		l.mu.Lock()
		l.methods = append(l.methods, m)
		l.mu.Unlock()
	}
	v.tap.Store(&tap)
	return func() { v.tap.Store(nil) }
}

// TestDeleteCalls reports the SOAP methods one Delete of a running VM
// makes, and the ListByTag by UID the operator's sweep makes before and
// after it (issue 19: ~21 calls a Proxy's delete). It fails only if a
// step made none.
func TestDeleteCalls(t *testing.T) {
	v := startVcsim(t)
	p := v.provider(t)
	ctx := context.Background()
	inst, err := p.Create(ctx, contract.CreateRequest{
		Name: "counted", UID: "uid-counted", Owner: testOwner, CloudInit: []byte("#cloud-config\n"), Port: 3128,
		Placement: contract.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
	})
	if err != nil {
		t.Fatal(err)
	}
	step := func(what string, fn func() error) {
		t.Helper()
		var l methodLog
		stop := l.watch(v)
		err := fn()
		stop()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		t.Logf("%s: %d SOAP calls: %s", what, len(l.methods), strings.Join(l.methods, " "))
		if len(l.methods) == 0 {
			t.Errorf("%s made no call", what)
		}
	}
	step("ListByTag(uid)", func() error { _, err := p.ListByTag(ctx, contract.LabelUID, "uid-counted"); return err })
	step("Delete", func() error { return p.Delete(ctx, inst.ProviderID) })
	step("ListByTag(uid) after", func() error { _, err := p.ListByTag(ctx, contract.LabelUID, "uid-counted"); return err })
}
