package libvirt

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kdomanski/iso9660"
	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/images/fetch"
)

// The fast tests run the provider against libvirt's own test driver,
// test:///default, in process: real libvirt (its API, its XML parsing, its
// error codes, its domain and volume bookkeeping) with fake hypervisor and
// storage. Its state is shared by every connection in one process, so a
// "restarted" provider (a new Provider, new connections) sees what the
// first one made, as after an operator restart.
//
// Three things the test driver cannot do, the control does through the
// provider's hooks (nil in production):
//   - virStorageVolUpload is not supported there: uploads land in the
//     control's memory, keyed by the volume's path (UserData reads the
//     seed's user-data back from there, through an ISO 9660 reader). The
//     real stream is tested against a real daemon (integration_test.go).
//   - virDomainInterfaceAddresses answers 192.168.122.23 for every running
//     domain with a NIC, from every source. The control calls the real
//     function and then keeps only what a "reporting" guest would show:
//     no address for a domain whose guest has not reported (ReportIP), and
//     the reported address for one that has. So Running-requires-IP and
//     the routable-IPv4 filter are tested, not short-circuited.
//   - There is no wire to stall or fail: the call hook runs at the start
//     of every backend call inside the goroutine that makes it, where the
//     control counts calls, holds them (contracttest.Gate) and returns
//     injected libvirt errors, each provoked from the test driver itself
//     where it can raise one.

const (
	testURI    = "test:///default"
	testPool   = "default-pool"
	testRegion = "host1"
)

// fixedTime is the image's modification time for http.ServeContent.
var fixedTime = time.Unix(1700000000, 0)

// testBackend is the control over test:///default.
type testBackend struct {
	t     *testing.T
	cfg   Config
	calls atomic.Int64
	gate  contracttest.Gate

	mu       sync.Mutex
	faults   map[string][]error
	volumes  map[string][]byte // volume path → uploaded bytes
	reported map[string]string // domain name → the address its guest reports
	conn     *libvirt.Connect  // the control's own connection
}

func newTestBackend(t *testing.T) *testBackend {
	t.Helper()
	img := make([]byte, 1<<20)
	_, _ = rand.Read(img)
	sum := sha256.Sum256(img)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "proxy.qcow2", fixedTime, bytes.NewReader(img))
	}))
	t.Cleanup(srv.Close)
	conn, err := libvirt.NewConnect(testURI)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = conn.Close() })
	b := &testBackend{
		t: t, conn: conn,
		faults: map[string][]error{}, volumes: map[string][]byte{}, reported: map[string]string{},
		cfg: Config{
			Regions:      map[string]Region{testRegion: {URI: testURI, Pool: testPool, Network: "default"}},
			MachineTypes: map[string]MachineType{"small": {CPUs: 1, MemoryMiB: 512}},
			Images:       map[string]fetch.Entry{"debian-12": {URL: srv.URL + "/proxy.qcow2", SHA256: hex.EncodeToString(sum[:]), Format: "qcow2"}},
			CallTimeout:  contract.Duration{Duration: 1e9},
		},
	}
	return b
}

func (b *testBackend) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(b.cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.hooks = hooks{call: b.call, upload: b.upload, addresses: b.addresses}
	return p
}

// call is the provider's call hook: count, hold while stalled, fail if a
// fault is queued for this call.
func (b *testBackend) call(ctx context.Context, name string) error {
	b.calls.Add(1)
	if err := b.gate.Pass(ctx); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if q := b.faults[name]; len(q) > 0 {
		b.faults[name] = q[1:]
		return q[0]
	}
	return nil
}

// upload keeps what the provider streams into a volume.
func (b *testBackend) upload(_ context.Context, _ *libvirt.Connect, vol *libvirt.StorageVol, size int64) (volumeWriter, error) {
	path, err := vol.GetPath()
	if err != nil {
		return nil, err
	}
	return &memUpload{b: b, path: path, size: size}, nil
}

type memUpload struct {
	b    *testBackend
	path string
	size int64
	buf  bytes.Buffer
}

func (u *memUpload) Write(p []byte) (int, error) { return u.buf.Write(p) }
func (u *memUpload) Abort() error                { return nil }

// Finish checks the length as the daemon does (an upload of N bytes must
// send N) and stores the bytes.
func (u *memUpload) Finish() error {
	if int64(u.buf.Len()) != u.size {
		return fmt.Errorf("upload to %s: %d bytes sent, %d announced", u.path, u.buf.Len(), u.size)
	}
	u.b.mu.Lock()
	defer u.b.mu.Unlock()
	u.b.volumes[u.path] = bytes.Clone(u.buf.Bytes())
	return nil
}

// addresses calls the real virDomainInterfaceAddresses, then shows what
// the guest has reported, and nothing before it has.
func (b *testBackend) addresses(dom *libvirt.Domain, src libvirt.DomainInterfaceAddressesSource) ([]libvirt.DomainInterface, error) {
	ifaces, err := dom.ListAllInterfaceAddresses(src)
	if err != nil {
		return nil, err
	}
	name, err := dom.GetName()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	ip, ok := b.reported[name]
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

// control is the harness's backend control.
type control struct{ b *testBackend }

var (
	_ contracttest.GuestReporter    = control{}
	_ contracttest.UnstartedCreator = control{}
	_ contracttest.UnmarkedCreator  = control{}
	_ contracttest.Staller          = control{}
	_ contracttest.FaultInjector    = control{}
	_ contracttest.UserDataReader   = control{}
	_ contracttest.CallCounter      = control{}
	_ contracttest.Inventory        = control{}
)

// ReportIP plays the guest getting its address (a DHCP lease, the agent).
func (c control) ReportIP(_ context.Context, providerID, ip string) error {
	_, name, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	if len(c.b.addressesOf(name)) == 0 {
		return fmt.Errorf("domain %s has no NIC to report on", name)
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	c.b.reported[name] = ip
	return nil
}

// addressesOf is what the test driver itself answers for a domain.
func (b *testBackend) addressesOf(name string) []libvirt.DomainInterface {
	dom, err := b.conn.LookupDomainByName(name)
	if err != nil {
		return nil
	}
	defer func() { _ = dom.Free() }()
	ifaces, _ := dom.ListAllInterfaceAddresses(libvirt.DOMAIN_INTERFACE_ADDRESSES_SRC_LEASE)
	return ifaces
}

// CreateUnstarted runs Create's steps up to the define, and stops there.
func (c control) CreateUnstarted(ctx context.Context, req contract.CreateRequest) (string, error) {
	p := c.b.provider(c.b.t)
	pl, err := p.plan(req)
	if err != nil {
		return "", err
	}
	if _, err := p.build(ctx, pl, req); err != nil {
		return "", err
	}
	return ids.Format(pl.regionName, req.Name), nil
}

// CreateUnmarked defines and starts a domain without marks, as a person
// would with virsh.
func (c control) CreateUnmarked(_ context.Context, name string, _ contract.Placement) (string, error) {
	dom, err := c.b.conn.DomainDefineXML(fmt.Sprintf(`<domain type='qemu'><name>%s</name><memory unit='MiB'>256</memory>
<os><type arch='x86_64' machine='pc'>hvm</type></os><devices><interface type='network'><source network='default'/></interface></devices></domain>`, name))
	if err != nil {
		return "", err
	}
	defer func() { _ = dom.Free() }()
	return ids.Format(testRegion, name), dom.Create()
}

// Stall holds every call at the hook.
func (c control) Stall() func() { return c.b.gate.Stall() }

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

// provoke returns the test driver's own error of a class: a lookup of a
// domain that does not exist (ERR_NO_DOMAIN), of a pool that does not
// exist (ERR_NO_STORAGE_POOL, permanent), a destroy of a domain that is
// not running (ERR_OPERATION_INVALID, transient). The test driver has no
// quota; that one is the ENOSPC error a real daemon's full pool returned
// (TestClassifyQuotaOnRealDaemon captures it).
func (b *testBackend) provoke(class error) error {
	var err error
	switch {
	case errors.Is(class, contract.ErrNotFound):
		_, err = b.conn.LookupDomainByName("no-such-domain")
	case errors.Is(class, contract.ErrPermanent):
		_, err = b.conn.LookupStoragePoolByName("no-such-pool")
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
// driver answers ERR_OPERATION_INVALID, as QEMU's driver does.
func (b *testBackend) inactiveDestroy() error {
	dom, err := b.conn.DomainDefineXML(`<domain type='qemu'><name>egress-fault-probe</name><memory unit='MiB'>256</memory><os><type>hvm</type></os></domain>`)
	if err != nil {
		return err
	}
	defer func() { _ = dom.Free() }()
	return dom.Destroy()
}

// UserData reads user-data from the seed volume's bytes as the guest's
// ISO 9660 reader does.
func (c control) UserData(_ context.Context, providerID string) ([]byte, error) {
	_, name, err := ids.Parse(providerID)
	if err != nil {
		return nil, err
	}
	c.b.mu.Lock()
	iso, ok := c.b.volumes["/"+testPool+"/"+seedName(name)]
	c.b.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("no seed was uploaded for %s", name)
	}
	return readISOFile(iso, "user-data")
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

// Resources lists every domain and every volume of the pool.
func (c control) Resources(context.Context) ([]string, error) {
	doms, err := c.b.conn.ListAllDomains(0)
	if err != nil {
		return nil, err
	}
	var out []string
	for i := range doms {
		name, _ := doms[i].GetName()
		_ = doms[i].Free()
		out = append(out, "domain "+name)
	}
	pool, err := c.b.conn.LookupStoragePoolByName(testPool)
	if err != nil {
		return nil, err
	}
	defer func() { _ = pool.Free() }()
	vols, err := pool.ListAllStorageVolumes(0)
	if err != nil {
		return nil, err
	}
	for i := range vols {
		name, _ := vols[i].GetName()
		_ = vols[i].Free()
		out = append(out, "volume "+name)
	}
	return out, nil
}
