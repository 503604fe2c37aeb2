package contracttest

import (
	"bytes"
	"errors"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// repeatCreate: a repeat Create, from the same provider or from a restarted
// one, returns the same instance and never makes a second (§4.1, §4.7).
func repeatCreate(e *env) {
	req := e.request()
	first := e.mustCreate(req)
	second := e.mustCreate(req)
	restarted, err := e.create(e.ctx(), e.cfg.NewProvider(e.t), req)
	if err != nil {
		e.t.Fatalf("Create from a restarted provider: %v", err)
	}
	for _, again := range []contract.Instance{second, restarted} {
		if again.ProviderID != first.ProviderID {
			e.t.Errorf("repeat Create returned %q, first returned %q", again.ProviderID, first.ProviderID)
		}
	}
	e.expectOne(req)
}

// expectOne checks the backend holds exactly one instance marked with
// req.UID.
func (e *env) expectOne(req contract.CreateRequest) {
	e.t.Helper()
	found, err := e.list(e.ctx(), e.p, contract.LabelUID, req.UID)
	if err != nil {
		e.t.Fatalf("ListByTag(%s, %s): %v", contract.LabelUID, req.UID, err)
	}
	for _, inst := range found {
		e.track(inst.ProviderID)
	}
	if len(found) != 1 {
		e.t.Errorf("the backend holds %d instances for UID %s, want exactly 1: %+v", len(found), req.UID, found)
	}
}

// createResumesAfterFailure: a Create cut off after the backend made the
// instance (a power-on fault after a clone, a lost response) is resumed by
// the next Create, from a restarted provider, without a duplicate.
func createResumesAfterFailure(e *env) {
	faults := need[FaultInjector](e.t, e.cfg.Backend)
	req := e.request()
	if err := faults.FailAfterCreate(); err != nil {
		e.t.Fatalf("backend control FailAfterCreate: %v", err)
	}
	if inst, err := e.create(e.ctx(), e.p, req); err == nil {
		e.t.Fatalf("Create succeeded (%s) although the backend failed after creating", inst.ProviderID)
	} else if c := contract.ClassOf(err); c != contract.ClassTransient {
		e.t.Errorf("Create failed with class %s, want Transient for an interrupted create: %v", c, err)
	}
	if _, err := e.create(e.ctx(), e.cfg.NewProvider(e.t), req); err != nil {
		e.t.Fatalf("Create after the failure: %v", err)
	}
	e.expectOne(req)
}

// createNeverAdoptsUnmarked: an instance with the same name that does not
// carry the operator's marks is never returned as the Proxy's instance.
func createNeverAdoptsUnmarked(e *env) {
	foreign := need[UnmarkedCreator](e.t, e.cfg.Backend)
	req := e.request()
	foreignID, err := foreign.CreateUnmarked(e.ctx(), req.Name, req.Placement)
	if err != nil {
		e.t.Fatalf("backend control CreateUnmarked: %v", err)
	}
	e.track(foreignID)
	inst, err := e.create(e.ctx(), e.p, req)
	switch {
	case err != nil && !errors.Is(err, contract.ErrPermanent):
		e.t.Errorf("Create over an unmarked instance of the same name failed with class %s, want Permanent (or a new instance): %v", contract.ClassOf(err), err)
	case err != nil && !strings.Contains(err.Error(), req.Name):
		e.t.Errorf("the collision error does not name the instance %q: %v", req.Name, err)
	case err == nil && inst.ProviderID == foreignID:
		e.t.Errorf("Create adopted the unmarked instance %s", foreignID)
	}
}

// invalidRequestRejectedBeforeBackend: a request the provider cannot
// honour is rejected with ErrPermanent naming the field and the value,
// before any backend call (§2).
func invalidRequestRejectedBeforeBackend(e *env) {
	cases := []struct {
		field, value string
		mutate       func(*contract.CreateRequest, string)
	}{
		{"Region", "no-such-region-x9", func(r *contract.CreateRequest, v string) { r.Placement.Region = v }},
		{"Zone", "no-such-zone-x9", func(r *contract.CreateRequest, v string) { r.Placement.Zone = v }},
		{"MachineType", "no-such-type-x9", func(r *contract.CreateRequest, v string) { r.Placement.MachineType = v }},
		{"Image", "no-such-image-x9", func(r *contract.CreateRequest, v string) { r.Placement.Image = v }},
		{"Name", "Not_A_Label", func(r *contract.CreateRequest, v string) { r.Name = v }},
		{"UID", "UID WITH SPACES", func(r *contract.CreateRequest, v string) { r.UID = v }},
		{"Port", "0", func(r *contract.CreateRequest, _ string) { r.Port = 0 }},
	}
	for _, c := range cases {
		if e.cfg.ignores(c.field) {
			continue
		}
		req := e.request()
		c.mutate(&req, c.value)
		before := e.calls()
		_, err := e.create(e.ctx(), e.p, req)
		switch {
		case !errors.Is(err, contract.ErrPermanent):
			e.t.Errorf("Create with %s %q returned %v (class %s), want ErrPermanent", c.field, c.value, err, contract.ClassOf(err))
		case !strings.Contains(err.Error(), c.value):
			e.t.Errorf("Create with %s %q: the error does not name the value: %v", c.field, c.value, err)
		}
		if after := e.calls(); before >= 0 && after != before {
			e.t.Errorf("Create with %s %q made %d backend calls before rejecting it, want 0", c.field, c.value, after-before)
		}
	}
}

// cloudInitByteForByte: the guest reads exactly the bytes of
// CreateRequest.CloudInit (§2).
func cloudInitByteForByte(e *env) {
	reader := need[UserDataReader](e.t, e.cfg.Backend)
	req := e.request()
	// Line endings, trailing blanks, non-ASCII text, no final newline: what
	// a careless re-encoding would change.
	req.CloudInit = []byte("#cloud-config\r\nwrite_files:\n  - path: /etc/motd\n    content: \"grüße \\t \"  \n\n# end")
	inst := e.mustCreate(req)
	got, err := reader.UserData(e.ctx(), inst.ProviderID)
	if err != nil {
		e.t.Fatalf("backend control UserData: %v", err)
	}
	if !bytes.Equal(got, req.CloudInit) {
		e.t.Errorf("the guest reads %q, want %q", got, req.CloudInit)
	}
}
