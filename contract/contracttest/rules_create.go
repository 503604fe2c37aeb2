package contracttest

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
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
// req.UID, and returns it.
func (e *env) expectOne(req contract.CreateRequest) contract.Instance {
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
		return contract.Instance{}
	}
	return found[0]
}

// createResumesAfterFailure: a Create cut off at any of its backend calls —
// the request lost before it arrived, or the answer lost after the backend
// did the work — is resumed by the next Create, from a restarted provider,
// into exactly one instance that carries the request's CloudInit (and the
// request's static network, for the drawn half of the cuts that carry
// one), leaving nothing else behind (§4.7, template entry 10).
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
	e.resumeCreate(req, "after FailAfterCreate")

	cutter := need[CallCutter](e.t, e.cfg.Backend)
	counter := need[CallCounter](e.t, e.cfg.Backend)
	resetter := need[Resetter](e.t, e.cfg.Backend)
	steps := e.callsOf(counter, func() { e.mustCreate(e.request()) })
	// Where the provider takes static addresses and the control reads what
	// the guest is given, one of each step's two cut Creates, drawn,
	// carries a network (each its own address; the steps are counted with
	// one too): the resumed instance's guest must be given it, whichever
	// step the cut fell on.
	reader, canRead := e.cfg.Backend.(NetworkReader)
	withNetwork := e.cfg.StaticNetwork != nil && canRead
	var network contract.StaticNetwork
	nextNetwork := func() *contract.StaticNetwork {
		network = neighbour(network)
		n := network
		return &n
	}
	if withNetwork {
		network = *e.cfg.StaticNetwork
		steps = max(steps, e.callsOf(counter, func() {
			req := e.request()
			req.Network = nextNetwork()
			e.mustCreate(req)
		}))
	}
	failed := map[bool]int{} // cuts that made the Create fail, by after
	for n := 1; n <= steps; n++ {
		networkAfter := e.draw.IntN(2) == 0 // which of the step's two cuts carries one
		for _, after := range []bool{false, true} {
			cut := fmt.Sprintf("call %d of %d cut %s", n, steps, cutWhen(after))
			req := e.request()
			if withNetwork && after == networkAfter {
				req.Network = nextNetwork()
				cut += ", a static address " + req.Network.Address.String()
			}
			if err := cutter.CutCall(n, after); err != nil {
				e.t.Fatalf("backend control CutCall(%d, %v): %v", n, after, err)
			}
			inst, err := e.create(e.ctx(), e.p, req)
			resetter.Reset()
			switch {
			case err != nil && contract.ClassOf(err) != contract.ClassTransient:
				e.t.Errorf("Create with %s failed with class %s, want Transient (a lost connection is retried): %v", cut, contract.ClassOf(err), err)
			case err != nil:
				failed[after]++
			default:
				// It says it succeeded: the instance is whole now, before any
				// retry could mend it.
				e.checkUserData(inst.ProviderID, req, "after Create succeeded with "+cut)
				if keeper, ok := e.p.(contract.EgressKeeper); ok && keeper.KeepsEgress() && inst.EgressIP == "" {
					e.t.Errorf("Create succeeded with %s and reports no egress address: a provider that keeps one per replica returns it from Create, attached", cut)
				}
			}
			resumed := e.resumeCreate(req, "with "+cut)
			if req.Network == nil || resumed.ProviderID == "" {
				continue
			}
			got, err := reader.DeliveredNetwork(e.ctx(), resumed.ProviderID)
			switch {
			case err != nil:
				e.t.Errorf("backend control DeliveredNetwork(%s): %v", resumed.ProviderID, err)
			case !sameNetwork(got, *req.Network):
				e.t.Errorf("Create resumed with %s: the guest is given %s via %s, resolvers %v; the request was %s via %s, resolvers %v",
					cut, got.Address, got.Gateway, got.DNS, req.Network.Address, req.Network.Gateway, req.Network.DNS)
			}
		}
	}
	e.cutsTookEffect("Create", failed)
}

// cutsTookEffect fails the rule when no cut of one kind made a call fail:
// the control's CutCall then reaches none of the provider's calls, and the
// rule proved nothing.
func (e *env) cutsTookEffect(call string, failed map[bool]int) {
	e.t.Helper()
	for _, after := range []bool{false, true} {
		if failed[after] == 0 {
			e.t.Errorf("no %s failed with a call cut %s: the backend control's CutCall cuts none of the provider's calls", call, cutWhen(after))
		}
	}
}

// checkUserData checks the guest of id reads req.CloudInit, where the
// control can read it.
func (e *env) checkUserData(id string, req contract.CreateRequest, what string) {
	e.t.Helper()
	e.checkUserDataOneOf(id, []contract.CreateRequest{req}, what)
}

// checkUserDataOneOf checks the guest of id reads the CloudInit of one of
// reqs, whole, where the control can read it.
func (e *env) checkUserDataOneOf(id string, reqs []contract.CreateRequest, what string) {
	e.t.Helper()
	reader, ok := e.cfg.Backend.(UserDataReader)
	if !ok {
		return
	}
	got, err := reader.UserData(e.ctx(), id)
	if err != nil || !slices.ContainsFunc(reqs, func(r contract.CreateRequest) bool { return bytes.Equal(got, r.CloudInit) }) {
		want := "the request's CloudInit"
		if len(reqs) > 1 {
			want = "one racer's CloudInit whole, such as"
		}
		e.t.Errorf("%s: the guest reads %q (%v), want %s %q", what, got, err, want, reqs[0].CloudInit)
	}
}

// resumeCreate repeats req's Create from a restarted provider and checks
// the result: one instance, the same one a second repeat returns, carrying
// req.CloudInit where the control can read it; it returns the instance.
func (e *env) resumeCreate(req contract.CreateRequest, what string) contract.Instance {
	e.t.Helper()
	inst, err := e.createRetrying(e.cfg.NewProvider(e.t), req)
	if err != nil {
		e.t.Errorf("Create resumed %s: %v", what, err)
		return contract.Instance{}
	}
	if one := e.expectOne(req); one.ProviderID != "" && one.ProviderID != inst.ProviderID {
		e.t.Errorf("Create resumed %s returned %s, but the instance marked with its UID is %s", what, inst.ProviderID, one.ProviderID)
	}
	e.checkUserData(inst.ProviderID, req, "Create resumed "+what)
	return inst
}

// callsOf counts the backend calls fn makes.
func (e *env) callsOf(counter CallCounter, fn func()) int {
	e.t.Helper()
	before := counter.Calls()
	fn()
	n := counter.Calls() - before
	if n < 1 {
		e.t.Fatalf("the backend counted %d calls for a Create or Delete: the CallCounter does not count the provider's calls", n)
	}
	return n
}

func cutWhen(after bool) string {
	if after {
		return "after it took effect"
	}
	return "before it arrived"
}

// createNeverAdoptsUnmarked: an instance with the same name that does not
// carry the operator's marks is never returned as the Proxy's instance, by
// this provider or a restarted one.
func createNeverAdoptsUnmarked(e *env) {
	foreign := need[UnmarkedCreator](e.t, e.cfg.Backend)
	req := e.request()
	foreignID, err := foreign.CreateUnmarked(e.ctx(), req.Name, req.Placement)
	if err != nil {
		e.t.Fatalf("backend control CreateUnmarked: %v", err)
	}
	e.trackForeign(foreignID)
	e.neverAdopts(req, foreignID, "an unmarked instance")
	found, err := e.list(e.ctx(), e.p, contract.LabelUID, req.UID)
	if err != nil {
		e.t.Fatalf("ListByTag(%s, %s): %v", contract.LabelUID, req.UID, err)
	}
	for _, inst := range found {
		if inst.ProviderID == foreignID {
			e.t.Errorf("Create marked the unmarked instance %s as the Proxy's", foreignID)
		}
		e.track(inst.ProviderID)
	}

	// Nor one of the same name that carries the request's own UID mark
	// but no managed mark (a copy of the Proxy's VM, unmarked).
	if uidOnly, ok := e.cfg.Backend.(UIDMarkedCreator); ok {
		copied := e.request()
		copyID, err := uidOnly.CreateUIDMarked(e.ctx(), copied.Name, copied.Placement, copied.UID)
		if err != nil {
			e.t.Fatalf("backend control CreateUIDMarked: %v", err)
		}
		e.trackForeign(copyID)
		e.neverAdopts(copied, copyID, "an instance with the request's UID mark and no managed mark")
	}

	// Nor another Proxy's: an instance of the same name marked managed
	// with another UID (a Proxy recreated under the same name, another
	// install's) is a collision too, under this Owner or another.
	other := e.request()
	theirs := e.mustCreate(other)
	for _, owner := range []string{other.Owner, e.otherOwner()} {
		mine := other
		mine.UID, mine.Owner = newUID(), owner
		inst, err := e.create(e.ctx(), e.p, mine)
		switch {
		case err != nil && !errors.Is(err, contract.ErrPermanent):
			e.t.Errorf("Create over another Proxy's instance of the same name failed with class %s, want Permanent (or a new instance): %v", contract.ClassOf(err), err)
		case err == nil && inst.ProviderID == theirs.ProviderID:
			e.t.Errorf("Create for UID %s (Owner %s) returned %s, the instance of UID %s", mine.UID, owner, theirs.ProviderID, other.UID)
		}
	}
	e.expectOne(other)
}

// neverAdopts creates req, with the rule's provider and a restarted one,
// over foreignID, an instance of req's name that is not the Proxy's
// (what says what it is): a Permanent error naming the instance, or a new
// instance, never foreignID.
func (e *env) neverAdopts(req contract.CreateRequest, foreignID, what string) {
	e.t.Helper()
	for _, p := range []contract.Provider{e.p, e.cfg.NewProvider(e.t)} {
		inst, err := e.create(e.ctx(), p, req)
		switch {
		case err != nil && !errors.Is(err, contract.ErrPermanent):
			e.t.Errorf("Create over %s of the same name failed with class %s, want Permanent (or a new instance): %v", what, contract.ClassOf(err), err)
		case err != nil && !strings.Contains(err.Error(), req.Name):
			e.t.Errorf("the collision error does not name the instance %q: %v", req.Name, err)
		case err == nil && inst.ProviderID == foreignID:
			e.t.Errorf("Create adopted %s, %s", foreignID, what)
		case err == nil:
			e.track(inst.ProviderID)
		}
	}
}

// invalidCase is one request field set to a value the contract forbids
// (or, with valid, to the edge of what it allows).
type invalidCase struct {
	field, value string // value as the error must name it; "" when it cannot
	valid        bool
	mutate       func(*contract.CreateRequest)
}

// requestBoundaries lists each request field at the edges of what the
// contract allows: one side must be accepted, the other refused.
// setNetwork sets a static network of address and gateway.
func setNetwork(address, gateway string) func(*contract.CreateRequest) {
	return func(r *contract.CreateRequest) {
		r.Network = &contract.StaticNetwork{Address: netip.MustParsePrefix(address), Gateway: netip.MustParseAddr(gateway)}
	}
}

func (e *env) requestBoundaries() []invalidCase {
	longName := func(n int) string {
		base := e.cfg.NamePrefix + "-" + randomHex(3) + "-"
		return base + strings.Repeat("a", n-len(base))
	}
	name63, name64 := longName(63), longName(64)
	setName := func(v string) func(*contract.CreateRequest) { return func(r *contract.CreateRequest) { r.Name = v } }
	setUID := func(v string) func(*contract.CreateRequest) { return func(r *contract.CreateRequest) { r.UID = v } }
	setPort := func(v int32) func(*contract.CreateRequest) { return func(r *contract.CreateRequest) { r.Port = v } }
	setOwner := func(v string) func(*contract.CreateRequest) { return func(r *contract.CreateRequest) { r.Owner = v } }
	owner63 := e.owner + "-" + strings.Repeat("o", 62-len(e.owner))
	owner64 := owner63 + "o"
	cases := []invalidCase{
		{"Region", "no-such-region-x9", false, func(r *contract.CreateRequest) { r.Placement.Region = "no-such-region-x9" }},
		{"Zone", "no-such-zone-x9", false, func(r *contract.CreateRequest) { r.Placement.Zone = "no-such-zone-x9" }},
		{"MachineType", "no-such-type-x9", false, func(r *contract.CreateRequest) { r.Placement.MachineType = "no-such-type-x9" }},
		{"Image", "no-such-image-x9", false, func(r *contract.CreateRequest) { r.Placement.Image = "no-such-image-x9" }},
		{"Name", name63, true, setName(name63)},
		{"Name", name64, false, setName(name64)},
		{"Name", "", false, setName("")},
		{"Name", "Not_A_Label", false, setName("Not_A_Label")},
		{"Name", "-leading-hyphen", false, setName("-leading-hyphen")},
		{"Name", "trailing-hyphen-", false, setName("trailing-hyphen-")},
		{"Name", "ct-dot.name", false, setName("ct-dot.name")},
		{"UID", "", false, setUID("")},
		{"UID", "UID WITH SPACES", false, setUID("UID WITH SPACES")},
		{"UID", "uid/with/slashes", false, setUID("uid/with/slashes")},
		{"Owner", "", false, setOwner("")},
		{"Owner", "Prod.Lab", false, setOwner("Prod.Lab")},
		{"Owner", "prod.lab", false, setOwner("prod.lab")},
		{"Owner", contract.LegacyManagedValue, false, setOwner(contract.LegacyManagedValue)},
		{"Owner", owner63, true, setOwner(owner63)},
		{"Owner", owner64, false, setOwner(owner64)},
		{"Port", "0", false, setPort(0)},
		{"Port", "-1", false, setPort(-1)},
		{"Port", "65536", false, setPort(65536)},
		{"Port", "1", true, setPort(1)},
		{"Port", "65535", true, setPort(65535)},
		{"network.address", "192.0.2.0/24", false, setNetwork("192.0.2.0/24", "192.0.2.1")},
		{"network.address", "2001:db8::10/64", false, setNetwork("2001:db8::10/64", "192.0.2.1")},
		{"network.gateway", "198.51.100.1", false, setNetwork("192.0.2.10/24", "198.51.100.1")},
	}
	if limit := e.cfg.MaxCloudInit; limit > 0 {
		at := func(n int) func(*contract.CreateRequest) {
			return func(r *contract.CreateRequest) {
				r.CloudInit = append([]byte("#cloud-config\n"), bytes.Repeat([]byte("#"), n-len("#cloud-config\n"))...)
			}
		}
		cases = append(cases,
			invalidCase{"CloudInit", strconv.Itoa(limit), true, at(limit)},
			invalidCase{"CloudInit", strconv.Itoa(limit + 1), false, at(limit + 1)})
	}
	return cases
}

// invalidRequestRejectedBeforeBackend: a request the provider cannot
// honour is rejected with ErrPermanent naming the field and the value,
// before any backend call and without a trace on the backend; a request at
// the edge of what is allowed is accepted (§1.2, §2).
func invalidRequestRejectedBeforeBackend(e *env) {
	for _, c := range e.requestBoundaries() {
		if e.cfg.ignores(c.field) {
			continue
		}
		req := e.request()
		c.mutate(&req)
		if c.valid {
			if _, err := e.create(e.ctx(), e.p, req); err != nil {
				e.t.Errorf("Create with %s %q, which the contract allows, failed: %v", c.field, c.value, err)
			}
			continue
		}
		before := e.calls()
		_, err := e.create(e.ctx(), e.p, req)
		text := ""
		if err != nil {
			text = strings.ToLower(err.Error())
		}
		switch {
		case !errors.Is(err, contract.ErrPermanent):
			e.t.Errorf("Create with %s %q returned %v (class %s), want ErrPermanent", c.field, c.value, err, contract.ClassOf(err))
		case contract.ClassOf(err) != contract.ClassPermanent:
			e.t.Errorf("Create with %s %q returned %v, class %s: one error, one class", c.field, c.value, err, contract.ClassOf(err))
		case !strings.Contains(text, strings.ToLower(c.field)):
			e.t.Errorf("Create with %s %q: the error does not name the field: %v", c.field, c.value, err)
		case c.value != "" && !strings.Contains(err.Error(), c.value):
			e.t.Errorf("Create with %s %q: the error does not name the value: %v", c.field, c.value, err)
		}
		if after := e.calls(); before >= 0 && after != before {
			e.t.Errorf("Create with %s %q made %d backend calls before rejecting it, want 0", c.field, c.value, after-before)
		}
	}
}

// cloudInitByteForByte: the guest reads exactly the bytes of
// CreateRequest.CloudInit (§2); a payload the channel cannot carry is
// refused before any backend call, never altered.
func cloudInitByteForByte(e *env) {
	reader := need[UserDataReader](e.t, e.cfg.Backend)
	all := make([]byte, 0, 512)
	for b := range 256 {
		all = append(all, byte(b))
	}
	for _, payload := range []struct {
		what string
		data []byte
	}{
		// Line endings, trailing blanks, non-ASCII text, no final newline:
		// what a careless re-encoding would change.
		{"text", []byte("#cloud-config\r\nwrite_files:\n  - path: /etc/motd\n    content: \"grüße \\t \"  \n\n# end")},
		// Every byte value, as a gzip-compressed user-data carries them.
		{"binary", append([]byte{0x1f, 0x8b}, all...)},
	} {
		req := e.request()
		req.CloudInit = payload.data
		before := e.calls()
		inst, err := e.create(e.ctx(), e.p, req)
		if err != nil {
			if !errors.Is(err, contract.ErrPermanent) || (before >= 0 && e.calls() != before) {
				e.t.Errorf("Create with %s CloudInit failed: %v; the only allowed failure is a refusal (ErrPermanent) before any backend call", payload.what, err)
			}
			continue
		}
		got, err := reader.UserData(e.ctx(), inst.ProviderID)
		if err != nil {
			e.t.Fatalf("backend control UserData: %v", err)
		}
		if !bytes.Equal(got, req.CloudInit) {
			e.t.Errorf("with %s CloudInit the guest reads %q, want %q", payload.what, got, req.CloudInit)
		}
	}
}
