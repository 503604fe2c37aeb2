package libvirt

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// TestListByTagSweepOnRealDaemon measures ListByTag against a real
// daemon (realDaemon: LIBVIRT_TEST_URI, or the private one) with
// LIBVIRT_TEST_SWEEP=<n> domains of one Owner defined and never started,
// and three of them running (QEMU without a disk: no lease, no agent, so
// each also asks the agent): it logs the calls and the time of each sweep
// and asserts only what was listed. Off unless LIBVIRT_TEST_SWEEP is set;
// the figures are in the spec, entry 12.
func TestListByTagSweepOnRealDaemon(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("LIBVIRT_TEST_SWEEP"))
	if n <= 0 {
		t.Skip("skipped: set LIBVIRT_TEST_SWEEP=<domains> (with a real daemon, see realDaemon) to measure a sweep")
	}
	l := realDaemon(t)
	p := labProvider(t, l, fetch.Entry{URL: "http://127.0.0.1:1/unused.qcow2", SHA256: fmt.Sprintf("%064x", 0), Format: "qcow2"})
	conn, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Close() })
	owner := fmt.Sprintf("c0ffee12-sweep-%d", n)
	now := time.Now().UTC()
	start := time.Now()
	for i := range n {
		req := contract.CreateRequest{Name: fmt.Sprintf("egress-sweep-%05d", i), UID: fmt.Sprintf("0e9d6c1a-7f3b-4d2e-9a5c-%012x", i),
			Owner: owner, Port: 3128, CloudInit: []byte("#cloud-config\n"),
			Placement: contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"}}
		pl, err := p.plan(req)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := p.domainXML(pl, req, now)
		if err != nil {
			t.Fatal(err)
		}
		dom, err := conn.DomainDefineXML(doc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if active, _ := dom.IsActive(); active {
				_ = dom.Destroy()
			}
			_ = dom.UndefineFlags(undefineFlags)
			_ = dom.Free()
		})
		if i < 3 {
			// Running needs its disks: start it without them (CDROM and
			// disk sources are checked at start).
			noDisks := fmt.Sprintf(`<domain type='qemu'><name>egress-sweep-run-%d</name><memory unit='MiB'>64</memory><os><type>hvm</type></os>
<metadata>%s</metadata><devices><interface type='network'><source network='%s'/></interface></devices></domain>`, i,
				marks{Managed: owner, UID: req.UID + "-run", CreatedAt: now.Format(time.RFC3339), Started: "true"}.xml(), l.network)
			run, err := conn.DomainCreateXML(noDisks, 0)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = run.Destroy(); _ = run.Free() })
		}
	}
	t.Logf("defined %d domains in %s", n, time.Since(start).Round(time.Millisecond))
	var calls atomic.Int64
	p.hooks.call = func(_ context.Context, _ backendCall, run func() error) error {
		calls.Add(1)
		return run()
	}
	for sweep := range 3 {
		calls.Store(0)
		start := time.Now()
		got, err := p.ListByTag(context.Background(), contract.LabelManaged, owner)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n+3 {
			t.Fatalf("listed %d, want %d", len(got), n+3)
		}
		t.Logf("sweep %d over %d domains: %d calls, %s", sweep, n+3, calls.Load(), took.Round(time.Millisecond))
	}
}

// TestListByTagLeaseOnRealDaemon boots one guest on a real daemon
// (LIBVIRT_TEST_IMAGE, as TestLifecycle) and checks that the list reads
// the same address from the network's lease table, matched by MAC, as Get
// reads from the per-domain lease source, with no agent call.
func TestListByTagLeaseOnRealDaemon(t *testing.T) {
	image := os.Getenv("LIBVIRT_TEST_IMAGE")
	if image == "" {
		t.Skip("skipped: set LIBVIRT_TEST_IMAGE to the proxy guest image (make image prints its path)")
	}
	l := realDaemon(t)
	entry, _ := serveImage(t, image)
	p := labProvider(t, l, entry)
	p.cfg.AddressSources = []string{SourceLease, SourceAgent}
	var agent atomic.Int64
	p.hooks.call = func(_ context.Context, c backendCall, run func() error) error {
		if c.step == "AgentAddresses" {
			agent.Add(1)
		}
		return run()
	}
	ctx := context.Background()
	req := contract.CreateRequest{Name: fmt.Sprintf("egress-lease-%d", time.Now().Unix()%1000000), UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000a1",
		Owner: testOwner, Port: 3128, CloudInit: []byte("#cloud-config\n"),
		Placement: contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"}}
	inst, err := p.Create(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.WithoutCancel(ctx), inst.ProviderID) })
	for deadline := time.Now().Add(5 * time.Minute); inst.State != contract.StateRunning; time.Sleep(2 * time.Second) {
		if time.Now().After(deadline) {
			t.Fatalf("not Running after 5 minutes: %+v", inst)
		}
		if inst, err = p.Get(ctx, inst.ProviderID); err != nil {
			t.Fatal(err)
		}
	}
	agent.Store(0)
	listed, err := p.ListByTag(ctx, contract.LabelUID, req.UID)
	if err != nil || len(listed) != 1 {
		t.Fatalf("ListByTag(%s) = %+v, %v; want the one instance", req.UID, listed, err)
	}
	if listed[0].State != contract.StateRunning || listed[0].IP != inst.IP {
		t.Errorf("listed %s %q, Get said %s %q: the lease table must give the lease Get reads", listed[0].State, listed[0].IP, inst.State, inst.IP)
	}
	if n := agent.Load(); n != 0 {
		t.Errorf("the list asked the agent %d times for a domain with a lease", n)
	}
}
