package libvirt

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// TestContractOnRealDaemon runs the conformance harness against the
// private libvirtd: each rule whose scenario a real daemon can play plays
// it there, with no hook between the provider and libvirt but a counter.
//   - Staller: the daemon frozen with SIGSTOP (a real hang: the socket
//     takes requests, nothing answers), released with SIGCONT.
//   - UnstartedCreator, UnmarkedCreator, DeleteStarter, LegacyCreator,
//     Inventory: real domains and volumes, defined, started (QEMU with
//     TCG; the overlay's base is an empty 16 MiB qcow2, so the guest stays
//     in the BIOS: no rule here needs it to boot), destroyed and
//     undefined through the control's own connection.
//   - UserDataReader: the seed volume downloaded with
//     virStorageVolDownload and read as ISO 9660, as the guest reads it;
//     NetworkReader the same, its network-config (delivered_test.go).
//   - CallCounter: the call hook counts the provider's steps and does
//     nothing else (the harness's unit for "no call before validation").
//
// What a real daemon cannot play is left to TestContract on the test
// driver, and the capability is left out here, so the harness skips the
// rule naming it:
//   - GuestReporter (RunningRequiresIP, OnlyRoutableIPv4,
//     UnknownStateIsStopped's Running instance, DeleteLeavesNothing's,
//     StaticAddressDelivered, which needs it beside the NetworkReader):
//     a guest that reports an address is a booted proxy image with a DHCP
//     lease or its static address; TestLifecycle and
//     TestStaticAddressLifecycle boot one each (minutes under TCG, not
//     per rule), and the latter holds the NetworkReader's reading of the
//     real seed to what the booted guest has.
//   - StateInjector: no daemon reports a state past its own enum.
//   - Locker: the rule holds a job on a never-started domain; on QEMU's
//     driver an inactive domain's jobs (define, metadata, start, undefine)
//     last one call each, so another client cannot hold one open.
//   - FaultInjector, CallCutter: they aim at the n-th call or one step's
//     next call; the daemon fails a call only for a cause, not on
//     request. TestFrozenDaemonIsDetected is the real cut (keepalive
//     closes the connection mid-call), TestClassifyQuotaOnRealDaemon a
//     real fault.
//   - CredentialRejecter, and Config.Credential (SentinelCredential): the
//     private daemon's socket admits root without a credential or an ACL
//     driver; a credential to refuse or to leak needs SSH or TLS, which
//     the end-to-end lane's sshd plays (make e2e).
//   - Config.OtherPlacements (ListByTagCoversEveryLocation): there is one
//     private daemon; a second region on the same daemon would be the
//     same location. TestContract's host2 is a second one.
func TestContractOnRealDaemon(t *testing.T) {
	l := privateDaemon(t)
	imgPath := filepath.Join(t.TempDir(), "base.qcow2")
	if out, err := exec.CommandContext(t.Context(), "qemu-img", "create", "-q", "-f", "qcow2", imgPath, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	entry, _ := serveImage(t, imgPath)
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = c.Close() })
	// Each call's bound, and the harness's budget for a hanging daemon:
	// a QEMU domain's start took more than 5 s on a loaded machine (the
	// CI run that starts the OpenStack lane's services beside this one:
	// "libvirt StartDomain: context deadline exceeded"); 15 s leaves it
	// three times that, at about 50 s more for CallsAreBounded.
	const budget = 15 * time.Second
	r := &realControl{t: t, lab: l, cfg: Config{
		Regions:      map[string]Region{"lab": {URI: l.uri, Pool: l.pool, Network: l.network}},
		DomainType:   envOr("LIBVIRT_TEST_DOMAIN_TYPE", DomainTypeQEMU),
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 256}},
		Images:       map[string]fetch.Entry{"proxy": entry},
		CallTimeout:  contract.Duration{Duration: budget},
	}}
	r.b = &testBackend{t: t, cfg: r.cfg, conns: map[string]*libvirt.Connect{"lab": c},
		pools: map[string]string{"lab": l.pool}, networks: map[string]string{"lab": l.network},
		foreign: map[string]bool{}, locks: map[string]*hold{}, states: map[string]libvirt.DomainState{},
		faults: map[string][]error{}, volumes: map[string]string{}, reported: map[string]string{}}
	start := time.Now()
	contracttest.Run(t, contracttest.Config{
		NewProvider:      func(t *testing.T) contract.Provider { return r.provider(t) },
		Backend:          r,
		Placement:        contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"},
		MaxCloudInit:     maxCloudInit,
		IgnoredPlacement: []string{"Zone"},
		CallBudget:       budget,
		WaitTimeout:      30 * time.Second,
		NamePrefix:       "ctreal",
		// In the lane's network (hack/e2e/env.sh), outside its DHCP range.
		StaticNetwork: &contract.StaticNetwork{Address: netip.MustParsePrefix("192.168.150.50/24"),
			Gateway: netip.MustParseAddr("192.168.150.1"), DNS: []netip.Addr{netip.MustParseAddr("192.168.150.1")}},
	})
	t.Logf("the harness on the private daemon took %s", time.Since(start).Round(time.Second))
}

// realControl is the harness's backend control over the private daemon.
type realControl struct {
	t     *testing.T
	lab   lab
	cfg   Config
	b     *testBackend // its domain and volume helpers, on the real daemon's connection
	calls atomic.Int64

	mu     sync.Mutex
	frozen int // pid of the stalled daemon, 0 when it runs
}

var (
	_ contracttest.Staller          = (*realControl)(nil)
	_ contracttest.Resetter         = (*realControl)(nil)
	_ contracttest.CallCounter      = (*realControl)(nil)
	_ contracttest.UnstartedCreator = (*realControl)(nil)
	_ contracttest.UnmarkedCreator  = (*realControl)(nil)
	_ contracttest.UIDMarkedCreator = (*realControl)(nil)
	_ contracttest.DeleteStarter    = (*realControl)(nil)
	_ contracttest.LegacyCreator    = (*realControl)(nil)
	_ contracttest.Inventory        = (*realControl)(nil)
	_ contracttest.UserDataReader   = (*realControl)(nil)
	_ contracttest.NetworkReader    = (*realControl)(nil)
)

func (r *realControl) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(r.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.hooks.call = func(_ context.Context, _ backendCall, run func() error) error {
		r.calls.Add(1)
		return run()
	}
	return p
}

func (r *realControl) Calls() int { return int(r.calls.Load()) }

// Stall freezes the daemon; release (or Reset) continues it.
func (r *realControl) Stall() func() {
	pid, err := r.lab.daemonPID()
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		r.t.Fatal(err)
	}
	r.frozen = pid
	return r.thaw
}

func (r *realControl) thaw() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.frozen != 0 {
		_ = syscall.Kill(r.frozen, syscall.SIGCONT)
		r.frozen = 0
	}
}

// Reset continues a frozen daemon and finishes deletions BeginDelete left.
func (r *realControl) Reset() {
	r.thaw()
	control{r.b}.Reset()
}

// CreateUnstarted runs Create's steps up to the define, and stops there.
func (r *realControl) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	return createUnstarted(ctx, r.provider(r.t), req)
}

// CreateLegacy: Create's steps, then <managed> rewritten to "true" through
// the control's connection, as a release before contract v0.3.0 left it.
func (r *realControl) CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	inst, err := r.provider(r.t).Create(ctx, req)
	if err != nil {
		return contract.Instance{}, err
	}
	inst.Owner = contract.LegacyManagedValue
	return inst, r.b.remark(inst.ProviderID, contract.LegacyManagedValue)
}

func (r *realControl) CreateUnmarked(ctx context.Context, name string, pl contract.Placement) (string, error) {
	return control{r.b}.CreateUnmarked(ctx, name, pl)
}

func (r *realControl) CreateUIDMarked(ctx context.Context, name string, pl contract.Placement, uid string) (string, error) {
	return control{r.b}.CreateUIDMarked(ctx, name, pl, uid)
}

func (r *realControl) DeleteUnmarked(ctx context.Context, providerID string) error {
	return control{r.b}.DeleteUnmarked(ctx, providerID)
}

func (r *realControl) BeginDelete(ctx context.Context, providerID string) (func(), error) {
	return control{r.b}.BeginDelete(ctx, providerID)
}

func (r *realControl) Resources(ctx context.Context) ([]string, error) {
	return control{r.b}.Resources(ctx)
}

// UserData downloads the domain's seed volume and reads user-data from it.
func (r *realControl) UserData(_ context.Context, providerID string) ([]byte, error) {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return nil, err
	}
	if region != "lab" {
		return nil, fmt.Errorf("control: no region %q", region)
	}
	return readISOFile(download(r.t, r.lab.uri, r.lab.pool, seedName(name)), "user-data")
}
