package libvirt

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kdomanski/iso9660"
	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// The fast tests run the provider against libvirt's own test driver in
// process: real libvirt (its API, its XML parsing, its error codes, its
// domain and volume bookkeeping) with fake hypervisor and storage. Region
// host1 is test:///default, whose state every connection in one process
// shares, so a "restarted" provider (a new Provider, new connections) sees
// what the first one made, as after an operator restart. Region host2 is a
// second daemon: a test driver instance of its own, read from a node file
// with its own pool and network.
//
// What the test driver cannot do, the control does through the provider's
// hooks (nil in production):
//   - virStorageVolUpload is not supported there: uploads land in the
//     control's memory, keyed by the volume's path (UserData reads the
//     seed's user-data back from there, through an ISO 9660 reader). The
//     real stream is tested against a real daemon (integration_test.go).
//   - virDomainInterfaceAddresses answers 192.168.122.x for every running
//     domain with a NIC, from every source. The control calls the real
//     function and then keeps only what a "reporting" guest would show:
//     no address for a domain whose guest has not reported (ReportIP), and
//     the reported address for one that has. So Running-requires-IP and
//     the routable-IPv4 filter are tested, not short-circuited.
//   - virNetworkGetDHCPLeases, which the list reads once per network, is
//     not implemented there: the leases hook answers a lease for each NIC
//     of a domain whose guest has reported (ReportIP).
//   - A test:///<file> instance is private to the connection that opened
//     it: the connect hook hands every provider a reference to the
//     control's one connection to host2, as every connection to one daemon
//     sees the same domains.
//   - The domain states the test driver can enter (running, paused, shut
//     off) are all in the provider's table: the state hook shows, for a
//     domain the control put there, a state past libvirt 9.0's enum, as a
//     later daemon could report.
//   - There is no wire to stall, cut or refuse: the call hook wraps every
//     backend call inside the goroutine that makes it. There the control
//     counts calls, holds them (Stall; a domain job another client holds:
//     Lock), fails them with libvirt's own errors (FailNext, each provoked
//     from the test driver where it can raise one; the daemon's access
//     control refusing the operator: RejectCredentials) and cuts one
//     before or after it took effect (CutCall: the connection dropped).

const (
	testURI    = "test:///default"
	testPool   = "default-pool"
	testRegion = "host1"

	otherRegion  = "host2"
	otherPool    = "host2-pool"
	otherNetwork = "host2-net"

	// testOwner is the Owner (install and provider entry) the package's
	// own tests create with; the harness sends its own.
	testOwner = "c0ffee12-libvirt"
)

// otherNode is host2's node file: a network and a pool, no domains.
const otherNode = `<node>
<network><name>host2-net</name><uuid>6b4c0f0e-8a3d-4c1e-9f7a-2d5b3c4e5f60</uuid><bridge name='virbr2'/><forward/>
<ip address='192.168.124.1' netmask='255.255.255.0'><dhcp><range start='192.168.124.2' end='192.168.124.254'/></dhcp></ip></network>
<pool type='dir'><name>host2-pool</name><uuid>0f8e3b2a-5c6d-4e7f-8a9b-1c2d3e4f5a6b</uuid><target><path>/host2-pool</path></target></pool>
</node>`

// fixedTime is the image's modification time for http.ServeContent.
var fixedTime = time.Unix(1700000000, 0)

// testBackend is the control over both test driver instances.
type testBackend struct {
	t     testing.TB
	cfg   Config
	calls atomic.Int64
	gate  contracttest.Gate
	// images holds the image server's answers while stalled: a Create
	// fetching the image into a pool waits there, between its lookup and
	// its volumes, without a call budget running out.
	images        contracttest.Gate
	imageRequests atomic.Int64
	// credential is the content of the key file both regions' URIs name
	// (keyfile=), where a real SSH key would be: the provider holds only
	// its path.
	credential string
	otherURI   string                      // host2's URI, without the query
	dir        string                      // the test's directory: node file, key, uploaded volumes
	pools      map[string]string           // region → pool
	networks   map[string]string           // region → network
	conns      map[string]*libvirt.Connect // region → the control's own connection

	mu        sync.Mutex
	faults    map[string][]error // step → libvirt errors its next calls return
	cut       cut
	rejecting bool
	// rejectFrom is the call, counted by calls, from which the access
	// control refuses every call (RejectCredentialsFrom); zero: none.
	rejectFrom int64
	stalls     []func()                       // every Stall's release
	locks      map[string]*hold               // "region/domain" → a job another client holds
	deleting   []func()                       // the finish of every BeginDelete
	foreign    map[string]bool                // "region/domain" made by CreateUnmarked
	states     map[string]libvirt.DomainState // domain UUID → the state GetState shows
	volumes    map[string]string              // volume path → the file holding its uploaded bytes
	reported   map[string]string              // domain UUID → the address its guest reports
	leased     map[string]map[string]string   // network → MAC → the address reported
}

// cut names one call by its number in calls, whether it fails before or
// after it took effect, and its answer: lostConnection (CutCall) or a
// refusal of a class (FailCall). Zero cuts nothing.
type cut struct {
	call   int64
	after  bool
	answer error
}

// hold is a domain job held by another client until released.
type hold struct {
	once sync.Once
	ch   chan struct{}
}

func (h *hold) release() { h.once.Do(func() { close(h.ch) }) }

func newTestBackend(t testing.TB) *testBackend {
	t.Helper()
	img := make([]byte, 1<<20)
	_, _ = rand.Read(img)
	sum := sha256.Sum256(img)
	b := &testBackend{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b.imageRequests.Add(1)
		if b.images.Pass(r.Context()) == nil {
			http.ServeContent(w, r, "proxy.qcow2", fixedTime, bytes.NewReader(img))
		}
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	b.dir = dir
	node, key := filepath.Join(dir, "host2.xml"), filepath.Join(dir, "libvirt-ssh-key")
	credential := "sentinel-credential-" + hex.EncodeToString(img[:8])
	if err := os.WriteFile(node, []byte(otherNode), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, []byte(credential), 0o600); err != nil {
		t.Fatal(err)
	}
	b.t, b.credential, b.otherURI = t, credential, "test://"+node
	b.pools = map[string]string{testRegion: testPool, otherRegion: otherPool}
	b.networks = map[string]string{testRegion: "default", otherRegion: otherNetwork}
	b.conns = map[string]*libvirt.Connect{}
	b.faults, b.locks, b.states = map[string][]error{}, map[string]*hold{}, map[string]libvirt.DomainState{}
	b.foreign = map[string]bool{}
	b.volumes, b.reported, b.leased = map[string]string{}, map[string]string{}, map[string]map[string]string{}
	for region, uri := range map[string]string{testRegion: testURI, otherRegion: b.otherURI} {
		conn, err := libvirt.NewConnect(uri)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = conn.Close() })
		b.conns[region] = conn
	}
	b.cfg = Config{
		Regions: map[string]Region{
			testRegion:  {URI: testURI + "?keyfile=" + key, Pool: testPool, Network: "default"},
			otherRegion: {URI: b.otherURI + "?keyfile=" + key, Pool: otherPool, Network: otherNetwork},
		},
		MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
		Images:       map[string]fetch.Entry{"debian-12": {URL: srv.URL + "/proxy.qcow2", SHA256: hex.EncodeToString(sum[:]), Format: "qcow2"}},
		CallTimeout:  contract.Duration{Duration: 1e9},
	}
	return b
}

func (b *testBackend) provider(t testing.TB) *Provider {
	t.Helper()
	p, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.hooks = hooks{call: b.call, connect: b.connect, upload: b.upload, addresses: b.addresses, state: b.state, leases: b.leases}
	return p
}

// connect opens test:///default as libvirt does, and hands out a
// reference to the control's connection to host2.
func (b *testBackend) connect(uri string) (*libvirt.Connect, error) {
	if uri == b.otherURI || strings.HasPrefix(uri, b.otherURI+"?") {
		c := b.conns[otherRegion]
		if err := c.Ref(); err != nil {
			return nil, err
		}
		return c, nil
	}
	return libvirt.NewConnect(uri)
}

// jobSteps are the provider's steps that take the domain's job on a QEMU
// daemon (virDomainObjBeginJob: SetMetadata, Create, Destroy, Undefine);
// lookups, state and XML reads do not.
var jobSteps = map[string]bool{"MarkStarted": true, "StartDomain": true, "UndefineDomain": true}

// The errors of a misbehaving daemon that the test driver cannot raise,
// as libvirt's client reports them.
var (
	// lostConnection: the connection dropped while the call waited for
	// its answer (rpc/virnetsocket.c, virNetSocketReadWire: EOF on the
	// socket). The client cannot tell whether the daemon acted.
	lostConnection = libvirt.Error{Code: libvirt.ERR_SYSTEM_ERROR, Domain: libvirt.FROM_RPC, Level: libvirt.ERR_ERROR,
		Message: "End of file while reading data: Input/output error"}
	// accessDenied: the daemon's access control (the polkit ACL driver)
	// refuses the operator's identity; access/viraccessmanager.c replaces
	// the driver's reason with this text, on every call, on an open
	// connection as on a new one.
	accessDenied = libvirt.Error{Code: libvirt.ERR_ACCESS_DENIED, Domain: libvirt.FROM_ACCESS, Level: libvirt.ERR_ERROR,
		Message: "access denied: 'QEMU' denied access"}
)

// call is the provider's call hook: count, hold while stalled, fail a cut
// call before it arrives, refuse while the credential is rejected, fail
// with a queued fault, wait for a job another client holds on the domain
// (a QEMU daemon gives up after 30 s with ERR_OPERATION_TIMEOUT; the
// provider's budget ends first), run, and lose the answer of a call cut
// after it took effect.
func (b *testBackend) call(ctx context.Context, c backendCall, run func() error) error {
	n := b.calls.Add(1)
	if err := b.gate.Pass(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	if b.rejectFrom != 0 && n >= b.rejectFrom {
		b.rejecting, b.rejectFrom = true, 0
	}
	cutHere, this := b.cut.call == n, b.cut
	if cutHere {
		b.cut = cut{}
	}
	switch {
	case cutHere && !this.after:
		b.mu.Unlock()
		return this.answer
	case b.rejecting:
		b.mu.Unlock()
		return accessDenied
	}
	if q := b.faults[c.step]; len(q) > 0 {
		b.faults[c.step] = q[1:]
		b.mu.Unlock()
		return q[0]
	}
	var job *hold
	if jobSteps[c.step] {
		job = b.locks[c.region+"/"+c.domain]
	}
	b.mu.Unlock()
	if job != nil {
		select {
		case <-job.ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := run(); err != nil || !cutHere {
		return err
	}
	return this.answer
}

// upload keeps what the provider streams into a volume in a file, as the
// daemon does: a buffer as large as the upload, allocated while the call's
// budget runs, took the race detector over 2 s for a 16 MiB seed on a
// loaded machine, longer than the 1 s budget the provider runs with here.
func (b *testBackend) upload(_ context.Context, _ *libvirt.Connect, vol *libvirt.StorageVol, size int64) (volumeWriter, error) {
	path, err := vol.GetPath()
	if err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(b.dir, "volume-*")
	if err != nil {
		return nil, err
	}
	return &fileUpload{b: b, path: path, size: size, f: f}, nil
}

type fileUpload struct {
	b    *testBackend
	path string
	size int64
	f    *os.File
	sent int64
}

func (u *fileUpload) Write(p []byte) (int, error) {
	n, err := u.f.Write(p)
	u.sent += int64(n)
	return n, err
}

func (u *fileUpload) Abort() error { _ = u.f.Close(); return os.Remove(u.f.Name()) }

// Finish checks the length as the daemon does (an upload of N bytes must
// send N) and keeps the file as the volume's content.
func (u *fileUpload) Finish() error {
	if err := u.f.Close(); err != nil {
		return err
	}
	if u.sent != u.size {
		return fmt.Errorf("upload to %s: %d bytes sent, %d announced", u.path, u.sent, u.size)
	}
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	u.b.volumes[u.path] = u.f.Name()
	return nil
}

// addresses calls the real virDomainInterfaceAddresses, then shows what
// the guest has reported, and nothing before it has.
func (b *testBackend) addresses(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error) {
	ifaces, err := dom.ListAllInterfaceAddresses(src)
	if err != nil {
		return nil, err
	}
	uuid, err := dom.GetUUIDString()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	ip, ok := b.reported[uuid]
	b.mu.Unlock()
	for i := range ifaces {
		ifaces[i].Addrs = nil
		if ok {
			typ := libvirt.IP_ADDR_TYPE_IPV4
			if strings.Contains(ip, ":") {
				typ = libvirt.IP_ADDR_TYPE_IPV6
			}
			ifaces[i].Addrs = []libvirt.DomainIPAddress{{Type: typ, Addr: ip, Prefix: 24}}
		}
	}
	return ifaces, nil
}

// unknownState is the first value past libvirt 9.0's virDomainState
// (VIR_DOMAIN_LAST): a state a later daemon may report.
const unknownState = libvirt.DOMAIN_PMSUSPENDED + 1

// state shows, instead of the state libvirt reported, the state the
// control put the domain in, if any.
func (b *testBackend) state(dom *libvirt.Domain, state libvirt.DomainState, reason int) (libvirt.DomainState, int) {
	uuid, err := dom.GetUUIDString() // held by the handle: no call
	if err != nil {
		return state, reason
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if injected, ok := b.states[uuid]; ok {
		return injected, 0
	}
	return state, reason
}

// leases answers virNetworkGetDHCPLeases, which the test driver does not
// implement ("this function is not supported by the connection driver"):
// a lease for each NIC on the network whose guest has reported an
// address, as dnsmasq's lease file would hold
// (https://libvirt.org/html/libvirt-libvirt-network.html#virNetworkGetDHCPLeases).
func (b *testBackend) leases(net *libvirt.Network) ([]libvirt.NetworkDHCPLease, error) {
	name, err := net.GetName()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []libvirt.NetworkDHCPLease
	for mac, ip := range b.leased[name] {
		out = append(out, libvirt.NetworkDHCPLease{Mac: mac, IPaddr: ip, Prefix: 24, Type: libvirt.IP_ADDR_TYPE_IPV4,
			ExpiryTime: time.Now().Add(time.Hour)})
	}
	return out, nil
}

// control is the harness's backend control.
type control struct{ b *testBackend }

var (
	_ contracttest.GuestReporter          = control{}
	_ contracttest.StateInjector          = control{}
	_ contracttest.PowerOffer             = control{}
	_ contracttest.UnstartedCreator       = control{}
	_ contracttest.Locker                 = control{}
	_ contracttest.DeleteStarter          = control{}
	_ contracttest.UnmarkedCreator        = control{}
	_ contracttest.UIDMarkedCreator       = control{}
	_ contracttest.Staller                = control{}
	_ contracttest.FaultInjector          = control{}
	_ contracttest.CredentialRejecter     = control{}
	_ contracttest.CredentialRejecterFrom = control{}
	_ contracttest.UserDataReader         = control{}
	_ contracttest.NetworkReader          = control{}
	_ contracttest.CallCounter            = control{}
	_ contracttest.CallCutter             = control{}
	_ contracttest.Resetter               = control{}
	_ contracttest.Inventory              = control{}
	_ contracttest.LegacyCreator          = control{}
)

// withDomain runs fn on the domain a providerID names, through the
// control's own connection to its region.
func (b *testBackend) withDomain(providerID string, fn func(*libvirt.Domain) error) error {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	conn, ok := b.conns[region]
	if !ok {
		return fmt.Errorf("control: no region %q", region)
	}
	return withDomain(conn, name, fn)
}

// ReportIP plays the guest getting its address (a DHCP lease, the agent).
func (c control) ReportIP(_ context.Context, providerID, ip string) error {
	return c.b.withDomain(providerID, func(dom *libvirt.Domain) error {
		ifaces, err := dom.ListAllInterfaceAddresses(libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE)
		if err != nil {
			return err
		}
		if len(ifaces) == 0 {
			return fmt.Errorf("domain %s has no NIC to report on", providerID)
		}
		uuid, err := dom.GetUUIDString()
		if err != nil {
			return err
		}
		doc, err := dom.GetXMLDesc(0)
		if err != nil {
			return err
		}
		_, nics, err := marksAndNICs(doc)
		if err != nil {
			return err
		}
		c.b.mu.Lock()
		defer c.b.mu.Unlock()
		c.b.reported[uuid] = ip
		for _, n := range nics {
			if c.b.leased[n.network] == nil {
				c.b.leased[n.network] = map[string]string{}
			}
			c.b.leased[n.network][n.mac] = ip
		}
		return nil
	})
}

// PowerOff destroys (forces off) the running domain, as virsh destroy
// does; it stays defined.
func (c control) PowerOff(_ context.Context, providerID string) error {
	return c.b.withDomain(providerID, func(dom *libvirt.Domain) error { return dom.Destroy() })
}

// SetUnknownState makes GetState show unknownState for the domain.
func (c control) SetUnknownState(_ context.Context, providerID string) error {
	return c.b.withDomain(providerID, func(dom *libvirt.Domain) error {
		uuid, err := dom.GetUUIDString()
		if err != nil {
			return err
		}
		c.b.mu.Lock()
		defer c.b.mu.Unlock()
		c.b.states[uuid] = unknownState
		return nil
	})
}

// CreateUnstarted runs Create's steps up to the define, and stops there.
func (c control) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	return createUnstarted(ctx, c.b.provider(c.b.t), req)
}

// createUnstarted runs p's Create steps up to the define and returns the
// instance's providerID: a Create cut off before its start, on any backend.
func createUnstarted(ctx context.Context, p *Provider, req contract.CreateRequest) (string, error) {
	pl, err := p.plan(req)
	if err != nil {
		return "", err
	}
	if _, err := p.build(ctx, pl, req); err != nil {
		return "", err
	}
	return ids.Format(pl.regionName, req.Name), nil
}

// CreateLegacy makes the domain as a release before contract v0.3.0 left
// it: Create's steps, then <managed> rewritten to "true" through the
// control's own connection.
func (c control) CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	inst, err := c.b.provider(c.b.t).Create(ctx, req)
	if err != nil {
		return contract.Instance{}, err
	}
	inst.Owner = contract.LegacyManagedValue
	return inst, c.b.remark(inst.ProviderID, contract.LegacyManagedValue)
}

// storedMarks reads the marks of the domain's persistent definition
// straight from libvirt, through the control's connection.
// (virDomainGetMetadata answers the element without its namespace, which
// parseMarks rightly does not take for ours.)
func (b *testBackend) storedMarks(providerID string) (marks, error) {
	var m marks
	err := b.withDomain(providerID, func(dom *libvirt.Domain) error {
		def, err := persistentDefinition(dom)
		if err != nil {
			return err
		}
		if def.Metadata == nil {
			return nil
		}
		m, err = parseMarks(def.Metadata.XML)
		return err
	})
	return m, err
}

// remark rewrites the domain's <managed>, live and persistent, as another
// install or an earlier release left it; its other marks stay.
func (b *testBackend) remark(providerID, owner string) error {
	m, err := b.storedMarks(providerID)
	if err != nil {
		return err
	}
	m.Managed = owner
	return b.withDomain(providerID, func(dom *libvirt.Domain) error {
		return dom.SetMetadata(libvirt.DOMAIN_METADATA_ELEMENT, m.bare(), xmlPrefix, xmlNamespace, libvirt.DOMAIN_AFFECT_CONFIG|libvirt.DOMAIN_AFFECT_LIVE)
	})
}

// Lock holds the domain's job as another client would (a snapshot, a
// virsh edit): until unlock, the provider's steps that need the job wait.
func (c control) Lock(_ context.Context, providerID string) (func(), error) {
	if err := c.b.withDomain(providerID, func(*libvirt.Domain) error { return nil }); err != nil {
		return nil, err
	}
	h := &hold{ch: make(chan struct{})}
	c.b.mu.Lock()
	c.b.locks[providerID] = h
	c.b.mu.Unlock()
	return func() {
		c.b.mu.Lock()
		if c.b.locks[providerID] == h {
			delete(c.b.locks, providerID)
		}
		c.b.mu.Unlock()
		h.release()
	}, nil
}

// BeginDelete does what a Delete cut off after its first step leaves (an
// operator that died mid-Delete, or one still running): the domain
// destroyed and undefined, its overlay and seed not yet deleted. libvirt
// has no "deleting" state: that is what a deletion in progress looks like
// to any other client. finish deletes the volumes.
func (c control) BeginDelete(_ context.Context, providerID string) (func(), error) {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return nil, err
	}
	err = c.b.withDomain(providerID, func(dom *libvirt.Domain) error {
		if active, err := dom.IsActive(); err == nil && active {
			if err := dom.Destroy(); err != nil {
				return err
			}
		}
		return dom.UndefineFlags(undefineFlags)
	})
	var once sync.Once
	finish := func() {
		once.Do(func() {
			_ = withPool(c.b.conns[region], c.b.pools[region], func(pool *libvirt.StoragePool) error {
				for _, v := range []string{overlayName(name), seedName(name)} {
					if vol, err := pool.LookupStorageVolByName(v); err == nil {
						_ = vol.Delete(0)
						_ = vol.Free()
					}
				}
				return nil
			})
		})
	}
	c.b.mu.Lock()
	c.b.deleting = append(c.b.deleting, finish)
	c.b.mu.Unlock()
	return finish, err
}

// CreateUnmarked defines and starts a domain without marks in the
// placement's region, as a person would with virsh.
func (c control) CreateUnmarked(_ context.Context, name string, pl contract.Placement) (string, error) {
	return c.defineForeign(name, pl, "")
}

// CreateUIDMarked defines and starts a domain whose metadata element
// carries the UID and no managed mark, as a copy of the operator's domain
// with that mark emptied by hand would.
func (c control) CreateUIDMarked(_ context.Context, name string, pl contract.Placement, uid string) (string, error) {
	meta, err := xml.Marshal(marks{UID: uid})
	if err != nil {
		return "", err
	}
	return c.defineForeign(name, pl, "<metadata>"+string(meta)+"</metadata>")
}

// defineForeign defines and starts a domain the operator did not make,
// with metadata (an XML element, or ""), which DeleteUnmarked may remove.
func (c control) defineForeign(name string, pl contract.Placement, metadata string) (string, error) {
	conn, ok := c.b.conns[pl.Region]
	if !ok {
		return "", fmt.Errorf("control: no region %q", pl.Region)
	}
	dom, err := conn.DomainDefineXML(fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>256</memory>%s
<os><type arch='x86_64' machine='pc'>hvm</type></os><devices><interface type='network'><source network='%s'/></interface></devices></domain>`, name, metadata, c.b.networks[pl.Region]))
	if err != nil {
		return "", err
	}
	defer func() { _ = dom.Free() }()
	id := ids.Format(pl.Region, name)
	c.b.mu.Lock()
	c.b.foreign[id] = true
	c.b.mu.Unlock()
	return id, dom.Create()
}

// DeleteUnmarked removes a domain CreateUnmarked or CreateUIDMarked made,
// and leaves alone one that carries the operator's managed mark.
func (c control) DeleteUnmarked(_ context.Context, providerID string) error {
	err := c.b.withDomain(providerID, func(dom *libvirt.Domain) error {
		_, m, err := definition(dom)
		if err != nil {
			return err
		}
		if m.Managed != "" {
			return fmt.Errorf("control: %s carries the operator's marks; not removing it", providerID)
		}
		if active, err := dom.IsActive(); err == nil && active {
			if err := dom.Destroy(); err != nil {
				return err
			}
		}
		return dom.Undefine()
	})
	if err == nil || isNotFound(classify(err)) {
		c.b.mu.Lock()
		delete(c.b.foreign, providerID)
		c.b.mu.Unlock()
	}
	if err != nil {
		return classify(err)
	}
	return nil
}

// Stall holds every call at the hook.
func (c control) Stall() func() {
	release := c.b.gate.Stall()
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.stalls = append(c.b.stalls, release)
	return release
}

// calls says which backend call serves each provider operation.
var calls = map[contracttest.Op]string{
	contracttest.OpCreate: "CreateOverlay",
	contracttest.OpGet:    "GetDomain",
	contracttest.OpList:   "ListDomains",
	contracttest.OpDelete: "UndefineDomain",
}

// FailNext queues libvirt's own error of the class for the call serving op.
func (c control) FailNext(op contracttest.Op, class error) error {
	err := c.b.provoke(class)
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.faults[calls[op]] = append(c.b.faults[calls[op]], err)
	return nil
}

// FailAfterCreate fails the start after the define: the domain stays.
func (c control) FailAfterCreate() error {
	err := c.b.provoke(nil)
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.faults["StartDomain"] = append(c.b.faults["StartDomain"], err)
	return nil
}

// CutCall drops the connection around the n-th call from now.
func (c control) CutCall(n int, after bool) error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.cut = cut{call: c.b.calls.Load() + int64(n), after: after, answer: lostConnection}
	return nil
}

// FailCall refuses the n-th call from now before it arrives: a permission
// refusal is the ACL driver's, which checks each API call on its own
// (a role may allow a domain's undefine and refuse a volume's delete), a
// quota the storage pool's full disk.
func (c control) FailCall(n int, class error) error {
	answer := accessDenied
	if errors.Is(class, contract.ErrQuota) {
		answer = quotaError
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.cut = cut{call: c.b.calls.Load() + int64(n), answer: answer}
	return nil
}

// RejectCredentials makes the daemon's access control refuse every call.
func (c control) RejectCredentials(reject bool) {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.rejecting, c.b.rejectFrom = reject, 0
}

// RejectCredentialsFrom makes the access control refuse every call from
// the n-th from now on.
func (c control) RejectCredentialsFrom(n int) error {
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.rejectFrom = c.b.calls.Load() + int64(n)
	return nil
}

// Reset lets stalled calls and held jobs go, finishes deletions
// BeginDelete left in progress, drops queued faults and the cut, accepts
// the credential again and forgets injected states.
func (c control) Reset() {
	c.b.mu.Lock()
	finishes := c.b.deleting
	c.b.deleting = nil
	c.b.mu.Unlock()
	for _, finish := range finishes {
		finish()
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	for _, release := range c.b.stalls {
		release()
	}
	c.b.stalls = nil
	for key, h := range c.b.locks {
		h.release()
		delete(c.b.locks, key)
	}
	clear(c.b.faults)
	c.b.cut = cut{}
	c.b.rejecting, c.b.rejectFrom = false, 0
	clear(c.b.states)
}

// provoke returns the test driver's own error of a class: a lookup of a
// domain that does not exist (ERR_NO_DOMAIN), of a pool that does not
// exist (ERR_NO_STORAGE_POOL, permanent), a destroy of a domain that is
// not running (ERR_OPERATION_INVALID, transient). The test driver has no
// quota; that one is the ENOSPC error a real daemon's full pool returned
// (TestClassifyQuotaOnRealDaemon captures it).
func (b *testBackend) provoke(class error) error {
	conn := b.conns[testRegion]
	var err error
	switch {
	case errors.Is(class, contract.ErrNotFound):
		_, err = conn.LookupDomainByName("no-such-domain")
	case errors.Is(class, contract.ErrPermanent):
		_, err = conn.LookupStoragePoolByName("no-such-pool")
	case errors.Is(class, contract.ErrQuota):
		err = quotaError
	default:
		err = b.inactiveDestroy()
	}
	if err == nil {
		b.t.Fatalf("provoking a %v error succeeded", class)
	}
	return err
}

var quotaError = libvirt.Error{Code: libvirt.ERR_SYSTEM_ERROR, Domain: libvirt.FROM_STORAGE, Level: libvirt.ERR_ERROR,
	Message: "cannot allocate 67108864 bytes in file '/var/lib/libvirt/images/egress-enospc-probe.raw': No space left on device"}

// inactiveDestroy destroys a defined, never-started domain: the test
// driver answers ERR_OPERATION_INVALID, as QEMU's driver does. The probe
// is undefined again.
func (b *testBackend) inactiveDestroy() error {
	dom, err := b.conns[testRegion].DomainDefineXML(`<domain type='qemu'><name>egress-fault-probe</name><memory unit='MiB'>256</memory><os><type>hvm</type></os></domain>`)
	if err != nil {
		return err
	}
	defer func() { _ = dom.Undefine(); _ = dom.Free() }()
	return dom.Destroy()
}

// UserData reads user-data from the seed volume's bytes as the guest's
// ISO 9660 reader does.
func (c control) UserData(_ context.Context, providerID string) ([]byte, error) {
	iso, err := c.b.seed(providerID)
	if err != nil {
		return nil, err
	}
	return readISOFile(iso, "user-data")
}

// seed is the seed volume's bytes: those uploaded to the path of the
// seed volume the domain has now, which must be as large as the upload.
func (b *testBackend) seed(providerID string) ([]byte, error) {
	region, name, err := ids.Parse(providerID)
	if err != nil {
		return nil, err
	}
	var iso []byte
	err = withPool(b.conns[region], b.pools[region], func(pool *libvirt.StoragePool) error {
		vol, err := pool.LookupStorageVolByName(seedName(name))
		if err != nil {
			return err
		}
		defer func() { _ = vol.Free() }()
		path, err := vol.GetPath()
		if err != nil {
			return err
		}
		info, err := vol.GetInfo()
		if err != nil {
			return err
		}
		b.mu.Lock()
		file, ok := b.volumes[path]
		b.mu.Unlock()
		var data []byte
		if ok {
			if data, err = os.ReadFile(file); err != nil {
				return err
			}
		}
		if !ok || uint64(len(data)) != info.Capacity {
			return fmt.Errorf("no seed of %d bytes was uploaded to %s (%d bytes)", info.Capacity, path, len(data))
		}
		iso = data
		return nil
	})
	return iso, err
}

func readISOFile(iso []byte, want string) ([]byte, error) {
	img, err := iso9660.OpenImage(bytes.NewReader(iso))
	if err != nil {
		return nil, err
	}
	label, err := img.Label()
	if err != nil {
		return nil, err
	}
	if label != "cidata" {
		return nil, fmt.Errorf("seed label %q, want cidata", label)
	}
	root, err := img.RootDir()
	if err != nil {
		return nil, err
	}
	children, err := root.GetChildren()
	if err != nil {
		return nil, err
	}
	for _, f := range children {
		if strings.TrimSuffix(strings.ToLower(f.Name()), ";1") == want {
			return io.ReadAll(f.Reader())
		}
	}
	return nil, fmt.Errorf("the seed has no %s", want)
}

// Calls counts the provider's backend calls.
func (c control) Calls() int { return int(c.b.calls.Load()) }

// Resources lists every domain and every volume of each region's pool,
// except the base images (a cache made once per pool and shared by every
// instance, which no instance's Delete removes: entry 4) and the domains
// CreateUnmarked made while they carry no marks (a person's, no
// lifecycle's to remove).
func (c control) Resources(context.Context) ([]string, error) {
	shared := map[string]bool{}
	for key, e := range c.b.cfg.Images {
		shared[baseName(key, e)], shared[markerName(baseName(key, e))] = true, true
	}
	var out []string
	for _, region := range slices.Sorted(maps.Keys(c.b.conns)) {
		conn := c.b.conns[region]
		doms, err := conn.ListAllDomains(0)
		if err != nil {
			return nil, err
		}
		for i := range doms {
			name, _ := doms[i].GetName()
			doc, _ := doms[i].GetXMLDesc(0)
			_ = doms[i].Free()
			c.b.mu.Lock()
			foreign := c.b.foreign[ids.Format(region, name)]
			c.b.mu.Unlock()
			if foreign && !strings.Contains(doc, xmlNamespace) {
				continue
			}
			out = append(out, "domain "+region+"/"+name)
		}
		err = withPool(conn, c.b.pools[region], func(pool *libvirt.StoragePool) error {
			vols, err := pool.ListAllStorageVolumes(0)
			if err != nil {
				return err
			}
			for i := range vols {
				name, _ := vols[i].GetName()
				_ = vols[i].Free()
				if !shared[name] {
					out = append(out, "volume "+region+"/"+name)
				}
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// foreignVolumes makes, through the control's connection, raw volumes of
// the names in the region's pool, as another process would (a person's
// disk that happens to have an instance's volume name), each of a size the
// provider never makes; checkVolumes reports any of them gone or changed.
func (b *testBackend) foreignVolumes(t *testing.T, region string, names ...string) map[string]uint64 {
	t.Helper()
	out := map[string]uint64{}
	err := withPool(b.conns[region], b.pools[region], func(pool *libvirt.StoragePool) error {
		for i, name := range names {
			size := uint64(4096 + i)
			vol, err := createVolume(pool, name, "raw", int64(size))
			if err != nil {
				return err
			}
			_ = vol.Free()
			out[name] = size
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = withPool(b.conns[region], b.pools[region], func(pool *libvirt.StoragePool) error {
			for name, size := range out {
				if vol, err := pool.LookupStorageVolByName(name); err == nil {
					if info, err := vol.GetInfo(); err == nil && info.Capacity == size {
						_ = vol.Delete(0)
					}
					_ = vol.Free()
				}
			}
			return nil
		})
	})
	return out
}

// checkVolumes looks in host1's pool, where every test that makes
// foreign volumes makes them.
func (b *testBackend) checkVolumes(t *testing.T, want map[string]uint64) {
	t.Helper()
	_ = withPool(b.conns[testRegion], b.pools[testRegion], func(pool *libvirt.StoragePool) error {
		for _, name := range slices.Sorted(maps.Keys(want)) {
			vol, err := pool.LookupStorageVolByName(name)
			if err != nil {
				t.Errorf("the foreign volume %s is gone: %v", name, err)
				continue
			}
			info, err := vol.GetInfo()
			_ = vol.Free()
			if err != nil || info.Capacity != want[name] {
				t.Errorf("the foreign volume %s was replaced: capacity %d (%v), want %d", name, info.Capacity, err, want[name])
			}
		}
		return nil
	})
}

// persistentDefinition reads and parses the domain's persistent
// (inactive) definition.
func persistentDefinition(dom *libvirt.Domain) (libvirtxml.Domain, error) {
	var def libvirtxml.Domain
	doc, err := dom.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		return def, err
	}
	return def, def.Unmarshal(doc)
}
