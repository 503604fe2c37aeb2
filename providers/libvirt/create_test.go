package libvirt

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

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
	req := contract.CreateRequest{Name: "egress-define-fails", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000bb", Owner: testOwner, Port: 3128,
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
	req := contract.CreateRequest{Name: "egress-start-race", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000cc", Owner: testOwner, Port: 3128,
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

// Creates of one instance on one provider value take turns: the volume
// steps delete and recreate the instance's volumes by name, so a second
// Create running beside the first would delete the first's volumes just
// before it defines the domain (ConcurrentCallsAreSafe saw the upload into
// a seed a racing Create had deleted fail as ErrNotFound). The first is
// held while it fetches the image, after its lookup and before its
// volumes; the second must make no backend call meanwhile, and end
// transient once it has waited a call budget.
func TestCreatesOfOneInstanceTakeTurns(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	type second struct{}
	called := make(chan struct{})
	var once sync.Once
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		if ctx.Value(second{}) != nil {
			once.Do(func() { close(called) })
		}
		return b.call(ctx, c, run)
	}
	req := contract.CreateRequest{Name: "egress-take-turns", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000dd", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	release := b.images.Stall()
	first := make(chan error, 1)
	go func() { _, err := p.Create(context.Background(), req); first <- err }()
	for b.imageRequests.Load() == 0 {
		time.Sleep(5 * time.Millisecond)
	}

	secondDone := make(chan error, 1)
	go func() {
		_, err := p.Create(context.WithValue(context.Background(), second{}, true), req)
		secondDone <- err
	}()
	select {
	case <-called:
		t.Error("a second Create of the instance made backend calls while the first was still working on it")
	case err := <-secondDone:
		if contract.ClassOf(err) != contract.ClassTransient {
			t.Errorf("a second Create while the first still runs = %v (class %s), want a transient error", err, contract.ClassOf(err))
		}
	}
	release()
	if err := <-first; err != nil {
		t.Fatalf("the first Create: %v", err)
	}
	inst, err := p.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create after the first finished: %v", err)
	}
	if err := p.Delete(context.Background(), inst.ProviderID); err != nil {
		t.Fatal(err)
	}
}

// Create never unlinks a volume it did not make. A volume of the
// instance's overlay or seed name that the operator did not leave (a
// person's disk, another tool's) is a collision: Create fails permanent,
// names the volume, and leaves it as it was, and removes what it made
// itself. The overlay is the operator's when its backing store is one of
// its base images in the pool; the seed when the overlay beside it is
// (volumes.go, ownedVolumes).
func TestCreateNeverUnlinksForeignVolumes(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	for _, tc := range []struct{ name, vol string }{
		{"egress-foreign-overlay", overlayName("egress-foreign-overlay")},
		{"egress-foreign-seed", seedName("egress-foreign-seed")},
	} {
		vols := b.foreignVolumes(t, testRegion, tc.vol)
		req := contract.CreateRequest{Name: tc.name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000ee", Owner: testOwner, Port: 3128,
			Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
		inst, err := p.Create(context.Background(), req)
		if err == nil {
			_ = p.Delete(context.Background(), inst.ProviderID)
		}
		if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(fmt.Sprint(err), tc.vol) {
			t.Errorf("Create beside a foreign volume %s = %v, want ErrPermanent naming the volume", tc.vol, err)
		}
		b.checkVolumes(t, vols)
		left, err := control{b}.Resources(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range left {
			if strings.Contains(r, tc.name) && !strings.HasSuffix(r, "/"+tc.vol) {
				t.Errorf("Create beside a foreign %s left behind: %s", tc.vol, r)
			}
		}
	}
}

// The volumes a Create cut off before its define left behind (the
// operator restarted between the volumes and the domain) are the
// operator's own: the next Create replaces them and succeeds.
func TestCreateReplacesItsOwnLeftVolumes(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	req := contract.CreateRequest{Name: "egress-left-volumes", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000ef", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	pl, err := p.plan(req)
	if err != nil {
		t.Fatal(err)
	}
	base, err := p.ensureImage(context.Background(), pl)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.createOverlay(context.Background(), pl, req.Name, base); err != nil {
		t.Fatal(err)
	}
	if err := p.createSeed(context.Background(), pl, req); err != nil {
		t.Fatal(err)
	}
	inst, err := p.Create(context.Background(), req)
	if err != nil {
		t.Fatalf("Create over the volumes a cut-off Create left: %v", err)
	}
	if err := p.Delete(context.Background(), inst.ProviderID); err != nil {
		t.Fatal(err)
	}
}

// A volume of the instance's name that another process makes between
// Create's volume check and its create of that volume (the create fails:
// ERR_STORAGE_VOL_EXIST) is not the Create's: the failed Create leaves
// that volume as it is, and removes what it made, but for the overlay
// beside a seed it could not make (dropVolumes: such a seed is most
// likely its own, whose answer was lost).
func TestFailedCreateLeavesAVolumeARacerMade(t *testing.T) {
	for _, step := range []string{"CreateOverlay", "CreateSeed"} {
		t.Run(step, func(t *testing.T) {
			b := newTestBackend(t)
			p := b.provider(t)
			name := "egress-raced-" + strings.ToLower(step)
			vol := map[string]string{"CreateOverlay": overlayName(name), "CreateSeed": seedName(name)}[step]
			t.Cleanup(func() { _ = p.deleteVolume(context.Background(), testRegion, testPool, overlayName(name)) })
			var racer map[string]uint64
			call := p.hooks.call
			p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
				if c.step == step && racer == nil {
					racer = b.foreignVolumes(t, testRegion, vol)
				}
				return call(ctx, c, run)
			}
			req := contract.CreateRequest{Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000f2", Owner: testOwner, Port: 3128,
				Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
			if inst, err := p.Create(context.Background(), req); err == nil {
				_ = p.Delete(context.Background(), inst.ProviderID)
				t.Fatalf("Create whose %s found the name taken succeeded", step)
			}
			if racer == nil {
				t.Fatalf("Create never reached %s", step)
			}
			b.checkVolumes(t, racer)
			left, err := control{b}.Resources(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kept := map[string][]string{"CreateOverlay": {vol}, "CreateSeed": {vol, overlayName(name)}}[step]
			for _, r := range left {
				if strings.Contains(r, name) && !slices.ContainsFunc(kept, func(k string) bool { return strings.HasSuffix(r, "/"+k) }) {
					t.Errorf("the failed Create left behind: %s", r)
				}
			}
		})
	}
}

// A seed volume whose create took effect but whose answer was lost with
// the connection (do runs the step again on a new one, and that finds the
// name taken) is the Create's own, though it cannot tell: the failed
// Create must not leave it standing alone, where the next Create takes it
// for another process's (a seed counts as the operator's only beside its
// overlay) and fails for good. The next Create finds the pair and
// replaces it.
func TestSeedWhoseAnswerWasLostDoesNotBlockTheNextCreate(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	// The connection broke after the daemon made the volume: libvirt's
	// client reports it as an RPC error (rpc/virnetclient.c), which do
	// takes for a lost connection (isConnectionLost).
	lost := libvirt.Error{Code: libvirt.ERR_RPC, Domain: libvirt.FROM_RPC, Level: libvirt.ERR_ERROR, Message: "internal error: client socket is closed"}
	var once sync.Once
	call := p.hooks.call
	p.hooks.call = func(ctx context.Context, c backendCall, run func() error) error {
		var cut bool
		if c.step == "CreateSeed" {
			once.Do(func() { cut = true })
		}
		err := call(ctx, c, run)
		if cut && err == nil {
			return lost
		}
		return err
	}
	req := contract.CreateRequest{Name: "egress-seed-answer-lost", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000f3", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	if inst, err := p.Create(context.Background(), req); err == nil {
		_ = p.Delete(context.Background(), inst.ProviderID)
		t.Fatal("Create whose seed's answer was lost and retried into ERR_STORAGE_VOL_EXIST succeeded; the test shows nothing")
	}
	inst, err := b.provider(t).Create(context.Background(), req)
	if err != nil {
		t.Fatalf("the next Create after a seed's answer was lost = %v, want the instance", err)
	}
	if err := p.Delete(context.Background(), inst.ProviderID); err != nil {
		t.Fatal(err)
	}
}

// A qcow2 of the instance's overlay name that another process made on a
// backing file of its own in the same pool (not one of the operator's
// base images) is not the operator's: Create refuses it and leaves it.
func TestCreateNeverUnlinksAForeignOverlay(t *testing.T) {
	b := newTestBackend(t)
	p := b.provider(t)
	const name = "egress-foreign-backed"
	var capacity uint64 = 4099
	err := withPool(b.conns[testRegion], testPool, func(pool *libvirt.StoragePool) error {
		backing, err := createVolume(pool, "persons-disk.raw", "raw", 4096)
		if err != nil {
			return err
		}
		defer func() { _ = backing.Free() }()
		t.Cleanup(func() { _ = backing.Delete(0) })
		path, err := backing.GetPath()
		if err != nil {
			return err
		}
		doc, err := (&libvirtxml.StorageVolume{
			Name:         overlayName(name),
			Capacity:     &libvirtxml.StorageVolumeSize{Value: capacity, Unit: "bytes"},
			Target:       &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}},
			BackingStore: &libvirtxml.StorageVolumeBackingStore{Path: path, Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}},
		}).Marshal()
		if err != nil {
			return err
		}
		vol, err := pool.StorageVolCreateXML(doc, 0)
		if err != nil {
			return err
		}
		t.Cleanup(func() { _ = vol.Delete(0); _ = vol.Free() })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	req := contract.CreateRequest{Name: name, UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000f4", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: testRegion, MachineType: "small", Image: "debian-12"}, CloudInit: []byte("#cloud-config\n")}
	inst, err := p.Create(context.Background(), req)
	if err == nil {
		_ = p.Delete(context.Background(), inst.ProviderID)
	}
	if !errors.Is(err, contract.ErrPermanent) || !strings.Contains(fmt.Sprint(err), overlayName(name)) {
		t.Errorf("Create beside a qcow2 of its overlay's name on a person's backing file = %v, want ErrPermanent naming the volume", err)
	}
	b.checkVolumes(t, map[string]uint64{overlayName(name): capacity})
}
