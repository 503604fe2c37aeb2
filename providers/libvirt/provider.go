// Package libvirt is the egress-proxies provider for libvirt hosts (QEMU
// with TCG or KVM), on libvirt.org/go/libvirt: each region is one libvirt
// daemon; an instance is a persistent domain on a qcow2 overlay of a base
// image fetched once per pool, with its cloud-init on a NoCloud seed
// volume attached as a read-only cdrom. docs/libvirt-provider-spec.md gives
// every decision and its reason; docs/libvirt-provider.md is the guide.
//
// The package needs cgo and libvirt's headers (Debian: libvirt-dev,
// pkg-config); it links libvirt.so.0.
package libvirt

import (
	"context"
	"fmt"
	"regexp"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// Type is the provider's type in the providers config.
const Type = "libvirt"

var ids = contract.IDFormat{
	Location: keyRE,
	Key:      regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`),
}

// Provider is the libvirt provider. It holds up to connectionsPerHost
// connections per region, each opened on first use and again after it
// breaks, each carrying one call at a time (connection.go).
type Provider struct {
	cfg     Config
	fetcher fetch.Fetcher

	mu sync.Mutex
	// conns holds the open connections by slot (slotKey: region and
	// index).
	conns map[string]*libvirt.Connect
	// prints holds, per slot, the credential files' fingerprint the
	// connection was opened with.
	prints map[string]string
	// creating holds, per "region/name", a channel closed when the Create
	// working on that instance returns: Creates of one instance take
	// turns (see turn).
	creating map[string]chan struct{}
	// closed counts the connections libvirt closed under the provider
	// (the close callback: keepalive, a daemon gone).
	closed int
	// kvm holds, per region, whether the host offered KVM when its
	// connection was last opened (domainType.go).
	kvm map[string]bool
	// opening holds, per region, a channel closed when the connect in
	// progress returns (connection.go).
	opening map[string]chan struct{}
	// slots holds, per region, which of its connections carry a call
	// (connection.go, take).
	slots map[string]*hostSlots

	// hooks are nil in production. The fast tests on test:///default set
	// them; see hooks.
	hooks hooks
}

// hooks are the seams the fast tests need where libvirt's test driver has
// no equivalent. Production leaves every one nil.
type hooks struct {
	// call wraps every backend call inside the goroutine that makes it;
	// run is the call itself (connect included). A hook that holds before
	// run is a hanging daemon, or a domain job held by another client, to
	// the caller; an error it returns without run is a call that never
	// arrived, one it returns after run a call whose answer was lost.
	call func(ctx context.Context, c backendCall, run func() error) error
	// connect replaces virConnectOpen: a test:///<file> instance is private
	// to one connection, so the fast tests' second region hands every
	// provider a reference to one connection instead.
	connect func(uri string) (*libvirt.Connect, error)
	// upload replaces the virStorageVolUpload stream, which test:///default
	// does not support.
	upload func(ctx context.Context, c *libvirt.Connect, vol *libvirt.StorageVol, size int64) (volumeWriter, error)
	// addresses replaces virDomainInterfaceAddresses, whose answer on
	// test:///default is the same fake address for every running domain.
	addresses func(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error)
	// state changes the state libvirt reported for a domain (by
	// virDomainGetState or in the list's bulk stats) into one the test
	// driver cannot enter (a later libvirt's).
	state func(dom *libvirt.Domain, state libvirt.DomainState, reason int) (libvirt.DomainState, int)
	// leases replaces virNetworkGetDHCPLeases, which the test driver does
	// not implement.
	leases func(net *libvirt.Network) ([]libvirt.NetworkDHCPLease, error)
}

// backendCall names one backend call for the call hook: its step, its
// region and, for a call on one domain, the domain's name.
type backendCall struct {
	step, region, domain string
}

var (
	_ contract.Provider = (*Provider)(nil)
	_ contract.Checker  = (*Provider)(nil)
)

// New validates cfg and returns a provider. It does not connect (contract
// §7).
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("libvirt provider config: %w", err)
	}
	if err := startEventLoop(); err != nil {
		return nil, fmt.Errorf("libvirt client event loop: %w", err)
	}
	return &Provider{cfg: cfg.withDefaults(), conns: map[string]*libvirt.Connect{}, prints: map[string]string{}, kvm: map[string]bool{},
		opening: map[string]chan struct{}{}, slots: map[string]*hostSlots{},
		creating: map[string]chan struct{}{}}, nil
}

// do runs one step against a region's daemon: bounded by budget, under a
// child span, logged at the call tier, its error classified. A connection
// found broken is dropped and the step runs once more on a new one.
func (p *Provider) do(ctx context.Context, region, name string, budget time.Duration, fn func(*libvirt.Connect) error) error {
	return p.call(ctx, backendCall{step: name, region: region}, budget, fn)
}

// onDomain is do for a step on one domain, looked up by name.
func (p *Provider) onDomain(ctx context.Context, region, step, name string, fn func(*libvirt.Domain) error) error {
	return p.call(ctx, backendCall{step: step, region: region, domain: name}, p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		return withDomain(c, name, fn)
	})
}

// call is do's body.
func (p *Provider) call(ctx context.Context, bc backendCall, budget time.Duration, fn func(*libvirt.Connect) error) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	ctx, span := contract.StartSpan(ctx, "libvirt."+bc.step, attribute.String("libvirt.region", bc.region))
	start := time.Now()
	err := run(ctx, func() error {
		var err error
		for attempt := 0; attempt < 2; attempt++ {
			var c *libvirt.Connect
			var key string
			attemptFn := func() error {
				slot, release, err := p.take(ctx, bc.region)
				if err != nil {
					return err
				}
				defer release()
				key = slotKey(bc.region, slot)
				if c, err = p.conn(ctx, bc.region, slot); err != nil {
					return err
				}
				defer func() { _, _ = c.Close() }()
				return fn(c)
			}
			if p.hooks.call != nil {
				err = p.hooks.call(ctx, bc, attemptFn)
			} else {
				err = attemptFn()
			}
			if !isConnectionLost(err) {
				return err
			}
			if c != nil {
				p.drop(key, c)
			}
		}
		return err
	})
	err = classify(err)
	contract.EndSpan(span, err)
	logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("libvirt call", "call", bc.step, "region", bc.region, "duration", time.Since(start), "class", contract.ClassOf(err))
	if err != nil {
		return fmt.Errorf("libvirt %s: %w", bc.step, err)
	}
	return nil
}

// run calls fn and returns its error, or ctx's once ctx is done. libvirt's
// calls are blocking C calls that take no context: one that hangs keeps
// its goroutine (and an OS thread) until the daemon answers or the
// connection breaks, but never its caller.
func run(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// plan is a validated request resolved against the catalogues.
type plan struct {
	regionName string
	region     Region
	machine    MachineType
	imageKey   string
	image      fetch.Entry
}

// plan validates req before any call (contract §1.2). Zone is ignored: a
// libvirt region is one host (§2.1).
func (p *Provider) plan(req contract.CreateRequest) (plan, error) {
	if err := req.Validate(); err != nil {
		return plan{}, err
	}
	pl := req.Placement
	region, machine, image, err := contract.LookupPlacement(pl, p.cfg.Regions, p.cfg.MachineTypes, p.cfg.Images)
	if err != nil {
		return plan{}, err
	}
	if err := contract.CloudInitFits(req.CloudInit, maxCloudInit, "the NoCloud seed"); err != nil {
		return plan{}, err
	}
	return plan{regionName: pl.Region, region: region, machine: machine, imageKey: pl.Image, image: image}, nil
}

// Create makes the domain (create-return: blocking; each step resumes a
// cut-off attempt, template entry 10):
//  1. look the domain up by name: ours → resume at 5; not ours → collision;
//  2. make sure the pool holds the base image (fetched once per pool);
//  3. (re)create the overlay and the seed volumes;
//  4. define the domain with the marks in its <metadata>;
//  5. if it is not running: write the started mark, then start it.
func (p *Provider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	pl, err := p.plan(req)
	if err != nil {
		return contract.Instance{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, req.Name)
	ctx = logr.NewContext(ctx, log)
	done, err := p.turn(ctx, pl.regionName, req.Name)
	if err != nil {
		return contract.Instance{}, err
	}
	defer done()

	d, err := p.lookup(ctx, pl.regionName, req.Name)
	if isNotFound(err) {
		d, err = p.build(ctx, pl, req)
	}
	if err != nil {
		return contract.Instance{}, err
	}
	if !d.owned(req.UID) {
		return contract.Instance{}, contract.Permanentf("a domain named %q already exists in region %s and does not belong to this Proxy (uid %s)", req.Name, pl.regionName, req.UID)
	}
	if !d.active() {
		if err := p.start(ctx, pl.regionName, d); err != nil {
			return contract.Instance{}, err
		}
		log.V(contract.LogStep).Info("started domain")
		if d, err = p.lookup(ctx, pl.regionName, req.Name); err != nil {
			return contract.Instance{}, err
		}
	}
	return d.instance(pl.regionName), nil
}

// turn waits until no other Create of the instance runs on this provider,
// at most one call budget, and returns the function that ends this one's
// turn. The volume steps delete and recreate the instance's volumes by name
// (a cut-off attempt's are replaced), so a second Create of the same name
// would delete the volumes of the first just before it defines the domain,
// or have the upload into its own seed fail because the first deleted it.
// Waiting longer than the budget is a transient error: the operator
// retries, and finds the instance the first Create made.
func (p *Provider) turn(ctx context.Context, region, name string) (done func(), err error) {
	key := region + "/" + name
	wait, cancel := context.WithTimeout(ctx, p.cfg.CallTimeout.Duration)
	defer cancel()
	for {
		p.mu.Lock()
		busy, ok := p.creating[key]
		if !ok {
			mine := make(chan struct{})
			p.creating[key] = mine
			p.mu.Unlock()
			return func() {
				p.mu.Lock()
				delete(p.creating, key)
				p.mu.Unlock()
				close(mine)
			}, nil
		}
		p.mu.Unlock()
		select {
		case <-busy:
		case <-wait.Done():
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("waiting for another Create of %s in region %s: %w", name, region, err)
			}
			return nil, fmt.Errorf("another Create of %s in region %s has been running for over %s; retry", name, region, p.cfg.CallTimeout.Duration)
		}
	}
}

// build runs steps 2–4 of Create and returns the defined domain. Volumes
// of the instance's names that a cut-off Create left are replaced (the
// domain is not defined yet, so nothing has written to them); one the
// operator did not make is a collision, left as it is (instanceVolumes).
func (p *Provider) build(ctx context.Context, pl plan, req contract.CreateRequest) (d domain, err error) {
	log := logr.FromContextOrDiscard(ctx)
	base, err := p.ensureImage(ctx, pl)
	if err != nil {
		return domain{}, err
	}
	pool := pl.region.Pool
	mine, err := p.instanceVolumes(ctx, pl.regionName, pool, req.Name)
	if err != nil {
		return domain{}, err
	}
	if err := foreignVolume(mine, pl.regionName, pool); err != nil {
		return domain{}, err
	}
	defer func() {
		if err != nil {
			p.dropVolumes(ctx, pl, req.Name, mine)
		}
	}()
	// The seed first: it counts as the operator's only beside its overlay.
	for _, vol := range []string{seedName(req.Name), overlayName(req.Name)} {
		if mine[vol] {
			if err := p.deleteVolume(ctx, pl.regionName, pool, vol); err != nil {
				return domain{}, err
			}
		}
	}
	// A volume is this Create's unless its create found the name taken:
	// by a racing process, or by this Create's own call whose answer was
	// lost (its retry finds the volume; the next Create replaces it).
	err = p.createOverlay(ctx, pl, req.Name, base)
	mine[overlayName(req.Name)] = !isExists(err)
	if err != nil {
		return domain{}, err
	}
	err = p.createSeed(ctx, pl, req)
	mine[seedName(req.Name)] = !isExists(err)
	if err != nil {
		return domain{}, err
	}
	log.V(contract.LogStep).Info("created volumes", "pool", pool)
	xml, err := p.domainXML(pl, req, time.Now().UTC())
	if err != nil {
		return domain{}, err
	}
	err = p.call(ctx, backendCall{step: "DefineDomain", region: pl.regionName, domain: req.Name}, p.cfg.CallTimeout.Duration, func(c *libvirt.Connect) error {
		dom, err := c.DomainDefineXML(xml)
		if err != nil {
			return err
		}
		return dom.Free()
	})
	if err != nil && !isExists(err) {
		return domain{}, err
	}
	// Defined now, by this call or by a racing one (isExists): read it back.
	if err == nil {
		log.V(contract.LogOutcome).Info("defined domain", "region", pl.regionName)
	}
	return p.lookup(ctx, pl.regionName, req.Name)
}

// dropVolumes deletes the volumes a failed build made or replaces (mine),
// unless the domain exists after all (a define whose answer was lost):
// volumes without a domain are found by no list, so nothing else would
// ever delete them. Best effort, bounded, even when ctx is done; what
// stays is replaced by the next Create.
func (p *Provider) dropVolumes(ctx context.Context, pl plan, name string, mine map[string]bool) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*p.cfg.CallTimeout.Duration)
	defer cancel()
	if _, err := p.lookup(ctx, pl.regionName, name); !isNotFound(err) {
		return
	}
	// The seed first: it counts as the operator's only beside its overlay.
	// A seed whose create found the name taken stays (it may be a racer's),
	// and so does the overlay beside it: that seed is most likely this
	// Create's own, made by a call whose answer was lost and run again on
	// a new connection (do), and alone it would read as another process's
	// to every later Create, which would fail for good; beside the overlay
	// the next Create replaces the pair.
	if taken, tried := mine[seedName(name)]; tried && !taken {
		return
	}
	for _, vol := range []string{seedName(name), overlayName(name)} {
		if !mine[vol] {
			continue
		}
		if err := p.deleteVolume(ctx, pl.regionName, pl.region.Pool, vol); err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "could not delete the volume of a failed create; the next Create replaces it", "volume", vol)
		}
	}
}

// start writes the started mark, then starts the domain. A start that
// fails on a domain that runs after all lost a race with another Create:
// done. The error cannot tell (QEMU's driver says ERR_OPERATION_INVALID
// "already running", the test driver ERR_INTERNAL_ERROR; either code also
// means other failures), so the domain's state decides.
func (p *Provider) start(ctx context.Context, region string, d domain) error {
	if !d.marks.started() {
		m := d.marks
		m.Started = "true"
		err := p.onDomain(ctx, region, "MarkStarted", d.name, func(dom *libvirt.Domain) error {
			return dom.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, m.bare(), xmlPrefix, xmlNamespace, libvirt.DOMAIN_AFFECT_CONFIG)
		})
		if err != nil {
			return err
		}
	}
	return p.onDomain(ctx, region, "StartDomain", d.name, func(dom *libvirt.Domain) error {
		err := dom.Create()
		if err != nil {
			if active, aerr := dom.IsActive(); aerr == nil && active {
				return nil
			}
		}
		return err
	})
}

// Get reads the domain.
func (p *Provider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	region, name, err := p.parse(providerID)
	if err != nil {
		return contract.Instance{}, err
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID))
	d, err := p.lookup(ctx, region, name)
	if err != nil {
		return contract.Instance{}, err
	}
	if !d.marked() {
		// A person's domain that took the name: the instance is gone.
		return contract.Instance{}, contract.NotFound(fmt.Errorf("domain %s in region %s carries no marks of the operator: not an instance", name, region))
	}
	return d.instance(region), nil
}

// Delete destroys and undefines the domain, then deletes its seed and
// overlay volumes; every step treats "already gone" as done, so a Delete
// cut off anywhere is finished by the next (delete-return: waits). A
// domain of the name without the operator's marks is not the instance
// (Get reports it gone): Delete leaves it, and the volumes it uses, alone.
// Only the volumes the operator made are deleted (instanceVolumes).
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID)
	if _, ok := p.cfg.Regions[region]; !ok {
		log.Info("region is no longer configured; nothing to delete", "region", region)
		return nil
	}
	ctx = logr.NewContext(ctx, log)
	var inUse map[string]bool
	err = p.onDomain(ctx, region, "UndefineDomain", name, func(dom *libvirt.Domain) error {
		def, m, err := definition(dom)
		if err != nil {
			return err
		}
		if m.Managed == "" {
			inUse = volumesOf(def)
			return nil
		}
		if active, err := dom.IsActive(); err != nil {
			return err
		} else if active {
			if err := dom.Destroy(); err != nil && !isInvalidState(classify(err)) {
				return err
			}
		}
		return dom.UndefineFlags(undefineFlags)
	})
	if err != nil && !isNotFound(err) {
		return err
	}
	if inUse != nil {
		log.Info("a domain without the operator's marks holds the name; leaving it", "region", region)
	}
	pool := p.cfg.Regions[region].Pool
	vols, err := p.instanceVolumes(ctx, region, pool, name)
	if err != nil {
		return err
	}
	// The seed first: it counts as the operator's only beside its overlay.
	for _, vol := range []string{seedName(name), overlayName(name)} {
		mine, present := vols[vol]
		if !present {
			continue
		}
		if !mine || inUse[vol] {
			log.Info("leaving a volume of the instance's name that the operator did not make or a foreign domain uses", "volume", vol)
			continue
		}
		if err := p.deleteVolume(ctx, region, pool, vol); err != nil {
			return err
		}
	}
	log.V(contract.LogOutcome).Info("deleted domain and its volumes", "region", region)
	return nil
}

// undefineFlags also drop what a person may have added to the domain
// (a managed save image, snapshot metadata); the operator makes neither.
const undefineFlags = libvirt.DOMAIN_UNDEFINE_MANAGED_SAVE | libvirt.DOMAIN_UNDEFINE_SNAPSHOTS_METADATA

// lookup finds the domain by name and reads it; ErrNotFound when there is
// none.
func (p *Provider) lookup(ctx context.Context, region, name string) (domain, error) {
	var d domain
	err := p.onDomain(ctx, region, "GetDomain", name, func(dom *libvirt.Domain) (err error) {
		d, err = p.read(ctx, dom)
		return err
	})
	return d, err
}

// parse checks a providerID and that its region is configured.
func (p *Provider) parse(providerID string) (string, string, error) {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return "", "", err
	}
	if _, ok := p.cfg.Regions[region]; !ok {
		return "", "", contract.InvalidField("providerID", providerID, "region "+region+" is not configured")
	}
	return region, name, nil
}

// withDomain looks a domain up by name, runs fn on it and frees it.
func withDomain(c *libvirt.Connect, name string, fn func(*libvirt.Domain) error) error {
	dom, err := c.LookupDomainByName(name)
	if err != nil {
		return err
	}
	defer func() { _ = dom.Free() }()
	return fn(dom)
}

func freeAll(doms []libvirt.Domain) {
	for i := range doms {
		_ = doms[i].Free()
	}
}
