package openstack

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// The test backend is the module's own fake of Keystone, Nova and Glance
// (package osfake), in process over TLS. Everything the harness needs from
// the cloud that the provider must not do — the build finishing with an
// address, faults, servers made by someone else — the control below does
// through the fake's control methods.

const (
	testAppCredID     = "0c5a2b3d6e7f48a1b2c3d4e5f6a7b8c9"
	testAppCredSecret = "sentinel-appcred-secret-5f0e2a"
	testUser          = "egress-operator"
	testPassword      = "sentinel-password-91c3"
	testProject       = "egress"
)

// cloud is one fake with the provider config that points at it.
type cloud struct {
	fake *osfake.Cloud
	cfg  Config
	dir  string
	gate contracttest.Gate

	mu sync.Mutex
	// unmarked are the servers the control made as a person would: no
	// lifecycle's to remove, so not in the Inventory.
	unmarked map[string]bool
}

// startCloud starts a two-region fake. opts may adjust its options.
func startCloud(t *testing.T, adjust ...func(*osfake.Options)) *cloud {
	t.Helper()
	opts := osfake.Options{
		Regions: []string{"RegionOne", "RegionTwo"}, Zones: []string{"az1", "az2"},
		Username: testUser, Password: testPassword, ProjectName: testProject,
		AppCredentialID: testAppCredID, AppCredentialSecret: testAppCredSecret,
		Network: osfake.Network{Subnets: []osfake.Subnet{dhcpSubnet, staticSubnet}},
	}
	for _, a := range adjust {
		a(&opts)
	}
	fake := osfake.New(opts)
	t.Cleanup(fake.Close)
	c := &cloud{fake: fake, dir: t.TempDir()}
	fake.SetGate(func(r *http.Request) error { return c.gate.Pass(r.Context()) })
	c.writeClouds(t, appCredClouds(fake.AuthURL(), testAppCredSecret))
	network := fake.Options().Network.ID
	c.cfg = Config{
		CloudsFile: filepath.Join(c.dir, "clouds.yaml"),
		CAFile:     c.write(t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: fake.Server.Certificate().Raw})),
		Regions: map[string]Region{
			"one": {Name: "RegionOne", Network: network, Zones: map[string]string{"az1": "az1", "az2": "az2"}},
			"two": {Name: "RegionTwo", Network: network, Zones: map[string]string{"az1": "az1"}},
		},
		MachineTypes: map[string]string{"small": "m1.small"},
		Images:       map[string]string{"debian-12": "debian-12"},
		CallTimeout:  contract.Duration{Duration: time.Second},
	}
	return c
}

func appCredClouds(authURL, secret string) string {
	return fmt.Sprintf("clouds:\n  openstack:\n    auth_type: v3applicationcredential\n    auth:\n      auth_url: %s\n      application_credential_id: %s\n      application_credential_secret: %s\n", authURL, testAppCredID, secret)
}

func passwordClouds(authURL, password string) string {
	return fmt.Sprintf("clouds:\n  openstack:\n    auth:\n      auth_url: %s\n      username: %s\n      password: %s\n      project_name: %s\n      user_domain_name: Default\n      project_domain_name: Default\n", authURL, testUser, password, testProject)
}

func (c *cloud) write(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(c.dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// writeClouds replaces the clouds file as the kubelet's symlink swap
// would: a new file, a new modification time.
func (c *cloud) writeClouds(t *testing.T, content string) {
	t.Helper()
	p := c.write(t, "clouds.yaml.new", []byte(content))
	if err := os.Rename(p, filepath.Join(c.dir, "clouds.yaml")); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Duration(len(content)) * time.Millisecond)
	if err := os.Chtimes(filepath.Join(c.dir, "clouds.yaml"), later, later); err != nil {
		t.Fatal(err)
	}
}

func (c *cloud) provider(t *testing.T) *Provider {
	t.Helper()
	p, err := New(c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// control is the harness's backend control over the fake.
type control struct{ c *cloud }

var (
	_ contracttest.GuestReporter          = control{}
	_ contracttest.CredentialRejecterFrom = control{}
	_ contracttest.StateInjector          = control{}
	_ contracttest.PowerOffer             = control{}
	_ contracttest.UnstartedCreator       = control{}
	_ contracttest.Locker                 = control{}
	_ contracttest.DeleteStarter          = control{}
	_ contracttest.UnmarkedCreator        = control{}
	_ contracttest.UIDMarkedCreator       = control{}
	_ contracttest.StrayEgressMaker       = control{}
	_ contracttest.Staller                = control{}
	_ contracttest.FaultInjector          = control{}
	_ contracttest.CredentialRejecter     = control{}
	_ contracttest.UserDataReader         = control{}
	_ contracttest.CallCounter            = control{}
	_ contracttest.Inventory              = control{}
	_ contracttest.CallCutter             = control{}
	_ contracttest.Resetter               = control{}
	_ contracttest.LegacyCreator          = control{}
	_ contracttest.NetworkReader          = control{}
)

func serverID(providerID string) (string, error) {
	_, id, err := ids.Parse(providerID)
	return id, err
}

// ReportIP plays Neutron binding the port and the build finishing: the
// server becomes ACTIVE with that address (the fake holds every build
// until then). A server booted on a port the provider made has that
// port's fixed IP and no other (Nova reports a server's ports' addresses):
// its build finishes with it, whatever ip says.
func (k control) ReportIP(_ context.Context, providerID, ip string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	if s, ok := k.c.fake.Lookup(id); !ok || len(s.Ports) == 0 {
		if err := k.c.fake.SetAddresses(id, ip); err != nil {
			return err
		}
	}
	return k.c.fake.FinishBuild(id)
}

// DeliveredNetwork reads the network_data.json the metadata service
// serves the guest (cloud-init's OpenStack datasource reads it) and
// parses its static network as cloud-init does.
func (k control) DeliveredNetwork(_ context.Context, providerID string) (contract.StaticNetwork, error) {
	id, err := serverID(providerID)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	raw, err := k.c.fake.NetworkData(id)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	return parseNetworkData(raw)
}

// PowerOff stops the server as Nova's os-stop leaves it (StopServer).
func (k control) PowerOff(_ context.Context, providerID string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	return k.c.fake.StopServer(id)
}

// SetUnknownState gives the server a status no Nova has today.
func (k control) SetUnknownState(_ context.Context, providerID string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	return k.c.fake.SetStatus(id, "HIBERNATED", "hibernated", "")
}

// CreateUnstarted makes the server as Create does, marks and user_data
// included, and holds its build.
func (k control) CreateUnstarted(_ context.Context, req contract.CreateRequest) (string, error) {
	p, err := New(k.c.cfg)
	if err != nil {
		return "", err
	}
	pl, err := p.plan(req)
	if err != nil {
		return "", err
	}
	id := k.c.fake.CreateServer(osfake.ServerSpec{
		Name: req.Name, Region: pl.region.Name, Held: true,
		Tags:     markTags(req),
		Metadata: markMetadata(req),
		UserData: base64.StdEncoding.EncodeToString(req.CloudInit),
	})
	return ids.Format(pl.regionKey, id), nil
}

// CreateLegacy makes the server as the previous release (contract v0.2)
// did: the managed and UID tags, no owner tag, metadata "managed: true".
// Its build runs as Create's does.
func (k control) CreateLegacy(_ context.Context, req contract.CreateRequest) (contract.Instance, error) {
	p, err := New(k.c.cfg)
	if err != nil {
		return contract.Instance{}, err
	}
	pl, err := p.plan(req)
	if err != nil {
		return contract.Instance{}, err
	}
	id := k.c.fake.CreateServer(osfake.ServerSpec{
		Name: req.Name, Region: pl.region.Name,
		Tags: []string{tagManaged, tagUIDPrefix + req.UID},
		// That release sent the contract's keys with their "/", which
		// Nova refuses: no such server exists on a real cloud. Its marks
		// are written in the keys Nova takes (metaKey).
		Metadata: map[string]string{metaKey(contract.LabelManaged): contract.LegacyManagedValue, metaKey(contract.LabelUID): req.UID},
		UserData: base64.StdEncoding.EncodeToString(req.CloudInit),
	})
	return contract.Instance{ProviderID: ids.Format(pl.regionKey, id)}, nil
}

// Lock holds the server's build (task_state spawning).
func (k control) Lock(_ context.Context, providerID string) (func(), error) {
	id, err := serverID(providerID)
	if err != nil {
		return nil, err
	}
	return k.c.fake.HoldBuild(id)
}

// BeginDelete starts Nova's delete and holds it in task_state deleting.
func (k control) BeginDelete(_ context.Context, providerID string) (func(), error) {
	id, err := serverID(providerID)
	if err != nil {
		return nil, err
	}
	return k.c.fake.BeginDelete(id)
}

// CreateUnmarked makes a server without tags or metadata, as a person
// would.
func (k control) CreateUnmarked(_ context.Context, name string, pl contract.Placement) (string, error) {
	return k.createForeign(name, pl, nil, nil), nil
}

// CreateUIDMarked makes a server with the UID's tag and metadata and
// neither the managed tag nor the managed metadata (uidOnlyMarks).
func (k control) CreateUIDMarked(_ context.Context, name string, pl contract.Placement, uid string) (string, error) {
	tags, metadata := uidOnlyMarks(uid)
	return k.createForeign(name, pl, tags, metadata), nil
}

// createForeign makes a server the operator did not make, which
// DeleteUnmarked may remove, and returns its providerID.
func (k control) createForeign(name string, pl contract.Placement, tags []string, metadata map[string]string) string {
	region := k.c.cfg.Regions[pl.Region]
	id := k.c.fake.CreateServer(osfake.ServerSpec{Name: name, Region: region.Name, Tags: tags, Metadata: metadata})
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	if k.c.unmarked == nil {
		k.c.unmarked = map[string]bool{}
	}
	k.c.unmarked[id] = true
	return ids.Format(pl.Region, id)
}

// uidOnlyMarks are the tags and metadata of a copy of the operator's
// server with the managed marks taken off: the UID's only.
func uidOnlyMarks(uid string) ([]string, map[string]string) {
	return []string{tagUIDPrefix + uid}, map[string]string{metaKey(contract.LabelUID): uid}
}

// managedMarked says whether a server's tags or metadata carry the
// managed mark: such a server is the operator's, never the control's to
// remove.
func managedMarked(tags []string, metadata map[string]string) bool {
	return slices.Contains(tags, tagManaged) || metadata[metaKey(contract.LabelManaged)] != ""
}

// DeleteUnmarked removes a server CreateUnmarked or CreateUIDMarked made;
// a server carrying the managed mark is not the control's to remove.
func (k control) DeleteUnmarked(_ context.Context, providerID string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	s, ok := k.c.fake.Lookup(id)
	switch {
	case !ok:
		return contract.NotFound(fmt.Errorf("control: no server %s", id))
	case managedMarked(s.Tags, s.Metadata):
		return fmt.Errorf("server %s carries tags %v: not an unmarked server", id, s.Tags)
	}
	k.c.mu.Lock()
	delete(k.c.unmarked, id)
	k.c.mu.Unlock()
	return k.c.fake.RemoveServer(id)
}

// CutCall cuts the n-th request from now at the fake's front: a 502 from
// the load balancer, before Nova (or Keystone, Glance) saw it or after it
// acted.
func (k control) CutCall(n int, after bool) error {
	k.c.fake.CutCall(n, after)
	return nil
}

// Reset lets stalled requests go and has the fake drop its queued faults,
// cuts and lost answers, accept the credential, unlock servers and finish
// held deletes.
func (k control) Reset() {
	k.c.gate.Stall()()
	k.c.fake.Reset()
}

// Stall holds every request at the fake's front.
func (k control) Stall() func() { return k.c.gate.Stall() }

// paths says which request serves each provider operation.
var paths = map[contracttest.Op][2]string{
	contracttest.OpCreate: {"POST", `/servers$`},
	contracttest.OpGet:    {"GET", `/servers/[0-9a-f-]{36}$`},
	contracttest.OpList:   {"GET", `/servers/detail$`},
	// DELETE, or forceDelete for a server with no task (deleteServer).
	contracttest.OpDelete: {"DELETE|POST", `/servers/[0-9a-f-]{36}(/action)?$`},
}

// policy is the action Nova's policy names for each operation.
var policy = map[contracttest.Op]string{
	contracttest.OpCreate: "os_compute_api:servers:create", contracttest.OpGet: "os_compute_api:servers:show",
	contracttest.OpList: "os_compute_api:servers:detail", contracttest.OpDelete: "os_compute_api:os-deferred-delete:force",
}

// FailNext answers the next request serving op with Nova's own error of
// the class.
func (k control) FailNext(op contracttest.Op, class error) error {
	m := paths[op]
	switch {
	case errors.Is(class, contract.ErrNotFound):
		k.c.fake.FailNext(m[0], m[1], 404, osfake.NotFoundBody)
	case errors.Is(class, contract.ErrQuota):
		k.c.fake.FailNext(m[0], m[1], 403, osfake.QuotaBody)
	case errors.Is(class, contract.ErrPermanent):
		k.c.fake.FailNext(m[0], m[1], 403, fmt.Sprintf(`{"forbidden": {"code": 403, "message": "Policy doesn't allow %s to be performed."}}`, policy[op]))
	case op == contracttest.OpDelete:
		k.c.fake.FailNext(m[0], m[1], 409, osfake.AllocationConflictBody)
	default:
		k.c.fake.FailNext(m[0], m[1], 503, osfake.UnavailableBody)
	}
	return nil
}

// FailCall refuses the n-th request from now with its service's own
// quota or policy refusal.
func (k control) FailCall(n int, class error) error {
	fault := osfake.PolicyFault
	if errors.Is(class, contract.ErrQuota) {
		fault = osfake.QuotaFault
	}
	k.c.fake.FailCall(n, fault)
	return nil
}

// FailAfterCreate lets Nova create the server and loses its answer.
func (k control) FailAfterCreate() error {
	k.c.fake.DropNextResponse("POST", paths[contracttest.OpCreate][1])
	return nil
}

// RejectCredentials makes Keystone refuse the credential and revokes the
// tokens it issued.
func (k control) RejectCredentials(reject bool) { k.c.fake.RejectCredentials(reject) }

// RejectCredentialsFrom refuses every credential from the n-th request on.
func (k control) RejectCredentialsFrom(n int) error {
	k.c.fake.RejectCredentialsFrom(n)
	return nil
}

// UserData is the user_data as the metadata service hands it to the guest.
func (k control) UserData(_ context.Context, providerID string) ([]byte, error) {
	id, err := serverID(providerID)
	if err != nil {
		return nil, err
	}
	s, ok := k.c.fake.Lookup(id)
	if !ok {
		return nil, fmt.Errorf("no server %s", id)
	}
	return s.UserData, nil
}

// Calls counts requests at the fake.
func (k control) Calls() int { return k.c.fake.Calls() }

// Resources lists servers and the addresses (ports) they hold, but the
// servers CreateUnmarked made while they still carry no marks: a
// person's servers are no lifecycle's to remove (a provider that marked
// one would bring it back into the list).
func (k control) Resources(context.Context) ([]string, error) {
	k.c.mu.Lock()
	defer k.c.mu.Unlock()
	var out []string
	for _, s := range k.c.fake.Servers() {
		if k.c.unmarked[s.ID] && len(s.Tags) == 0 && len(s.Metadata) == 0 {
			continue
		}
		out = append(out, "server "+s.ID+" "+s.Name)
		for _, a := range s.Addresses {
			out = append(out, "port of "+s.ID+" "+a)
		}
	}
	// Ports made for static addresses, whatever holds them.
	for _, p := range k.c.fake.Ports() {
		out = append(out, fmt.Sprintf("port %s %s %v", p.ID, p.Name, p.IPs))
	}
	// A Proxy's server group is its own; the managed security group is
	// shared by every server of an Owner, made once, and left out.
	for _, g := range k.c.fake.ServerGroups() {
		out = append(out, "server group "+g.ID+" "+g.Name)
	}
	// A replica's floating IP, kept until released (contract §3.1).
	for _, f := range k.c.fake.FloatingIPs() {
		out = append(out, "floating IP "+f.ID+" "+f.Address)
	}
	return out, nil
}
