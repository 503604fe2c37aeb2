package openstack

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/quotasets"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/users"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/ports"
	"github.com/gophercloud/gophercloud/v2/openstack/networking/v2/subnets"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// realControl is the harness's backend control over the real cloud: what
// the cloud's operator can do, through the admin API, and the faults of
// the network between the provider and the APIs, through the wire.
//
// Left out, and why (the rules needing them are skipped on the real
// cloud and run on osfake):
//   - UnstartedCreator (NeverStartedIsNeverStopped, GetDuringLock): a real
//     Nova build always ends, ACTIVE or ERROR, within seconds on the
//     FakeDriver; no API holds a server in BUILD. Locker is left out with
//     it: GetDuringLock needs both, and Nova's lock action does not hold a
//     build (TestRealCloudLockedDelete shows what it does hold).
//   - DeleteStarter (GetDuringDelete): nothing in Nova's API holds a
//     delete in task_state deleting; the compute service runs it to its
//     end at once.
type realControl struct {
	rc *realCloud
	t  *testing.T

	mu sync.Mutex
	// unmarked are the servers CreateUnmarked made: no lifecycle's to
	// remove, so not in the Inventory.
	unmarked map[string]bool
}

var (
	_ contracttest.GuestReporter      = (*realControl)(nil)
	_ contracttest.StateInjector      = (*realControl)(nil)
	_ contracttest.PowerOffer         = (*realControl)(nil)
	_ contracttest.UnmarkedCreator    = (*realControl)(nil)
	_ contracttest.UIDMarkedCreator   = (*realControl)(nil)
	_ contracttest.StrayEgressMaker   = (*realControl)(nil)
	_ contracttest.LegacyCreator      = (*realControl)(nil)
	_ contracttest.Staller            = (*realControl)(nil)
	_ contracttest.FaultInjector      = (*realControl)(nil)
	_ contracttest.CredentialRejecter = (*realControl)(nil)
	_ contracttest.UserDataReader     = (*realControl)(nil)
	_ contracttest.CallCounter        = (*realControl)(nil)
	_ contracttest.CallCutter         = (*realControl)(nil)
	_ contracttest.Resetter           = (*realControl)(nil)
	_ contracttest.Inventory          = (*realControl)(nil)
	_ contracttest.NetworkReader      = (*realControl)(nil)
)

// DeliveredNetwork reads, as the admin, what Nova builds the guest's
// network_data.json from (nova/virt/netutils.py get_network_metadata,
// from the port's fixed IP and its subnet): the server's port's address
// with its subnet's prefix length, the subnet's gateway and resolvers.
// The lane runs no metadata service for the guest to read it from. The
// guest reads it once it boots, so the control waits for the build to
// end: Nova's compute binds the port after the scheduler placed the
// server (the first run read the port unbound right after the create).
func (k *realControl) DeliveredNetwork(ctx context.Context, providerID string) (contract.StaticNetwork, error) {
	id, err := serverID(providerID)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	if err := k.waitServer(ctx, id, func(s *servers.Server) bool { return s.Status == "ACTIVE" }); err != nil {
		return contract.StaticNetwork{}, err
	}
	a := k.rc.admin
	pages, err := ports.List(a.network, ports.ListOpts{DeviceID: id}).AllPages(ctx)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	ps, err := ports.ExtractPorts(pages)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	if len(ps) != 1 || len(ps[0].FixedIPs) == 0 {
		return contract.StaticNetwork{}, fmt.Errorf("control: server %s has ports %+v, want one with a fixed IP", id, ps)
	}
	fixed := ps[0].FixedIPs[0]
	sub, err := subnets.Get(ctx, a.network, fixed.SubnetID).Extract()
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	cidr, err := netip.ParsePrefix(sub.CIDR)
	if err != nil {
		return contract.StaticNetwork{}, err
	}
	var out contract.StaticNetwork
	out.Address = netip.PrefixFrom(netip.MustParseAddr(fixed.IPAddress), cidr.Bits())
	out.Gateway, _ = netip.ParseAddr(sub.GatewayIP)
	for _, d := range sub.DNSNameservers {
		out.DNS = append(out.DNS, netip.MustParseAddr(d))
	}
	return out, nil
}

// member is a compute client of the tenant's user, outside the wire: a
// person using the cloud beside the operator.
func (k *realControl) member(ctx context.Context) (*gophercloud.ServiceClient, error) {
	p, err := New(k.rc.tenant.cfg)
	if err != nil {
		return nil, err
	}
	c, err := p.session(ctx, "one")
	if err != nil {
		return nil, err
	}
	return c.compute, nil
}

// ReportIP waits for what a guest's report plays on other backends:
// Nova's build ending with the address Neutron gave the port (the FakeDriver
// plugs nothing; the address is the port's). The reported ip cannot be
// given to a real port, so it is not used: the harness runs with
// IPAssignedAtCreate.
func (k *realControl) ReportIP(ctx context.Context, providerID, _ string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	return k.waitServer(ctx, id, func(s *servers.Server) bool {
		return s.Status == "ACTIVE" && serverIPv4(*s) != ""
	})
}

// waitServer polls the server as the admin until done says so, for up to
// two minutes; a server in ERROR ends the wait with its fault.
func (k *realControl) waitServer(ctx context.Context, id string, done func(*servers.Server) bool) error {
	var last *servers.Server
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		s, err := servers.Get(ctx, k.rc.admin.compute, id).Extract()
		if err != nil {
			return err
		}
		last = s
		if done(s) {
			return nil
		}
		if s.Status == "ERROR" {
			return fmt.Errorf("server %s went to ERROR: %s", id, s.Fault.Message)
		}
	}
	return fmt.Errorf("server %s: still %s (task_state %q) after 2 minutes", id, last.Status, last.TaskState)
}

// PowerOff stops the server (os-stop, which the FakeDriver carries out)
// and waits for SHUTOFF with no task.
func (k *realControl) PowerOff(ctx context.Context, providerID string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	if err := servers.Stop(ctx, k.rc.admin.compute, id).ExtractErr(); err != nil {
		return err
	}
	return k.waitServer(ctx, id, func(s *servers.Server) bool { return s.Status == "SHUTOFF" && s.TaskState == "" })
}

// SetUnknownState suspends the server (an admin action the FakeDriver
// carries out): SUSPENDED is not in the provider's table by name, it
// takes the branch every status it does not know takes. A real Nova makes
// no status outside its own list, so this is the nearest real one.
func (k *realControl) SetUnknownState(ctx context.Context, providerID string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	if err := servers.Suspend(ctx, k.rc.admin.compute, id).ExtractErr(); err != nil {
		return err
	}
	return k.waitServer(ctx, id, func(s *servers.Server) bool { return s.Status == "SUSPENDED" && s.TaskState == "" })
}

// CreateUnmarked boots a server of that name with the tenant's user, no
// tags, no metadata, as a person would.
func (k *realControl) CreateUnmarked(ctx context.Context, name string, pl contract.Placement) (string, error) {
	return k.bootForeign(ctx, name, pl, nil, nil)
}

// CreateUIDMarked boots a server with the UID's tag and metadata and
// neither managed mark (uidOnlyMarks), as the tenant's user.
func (k *realControl) CreateUIDMarked(ctx context.Context, name string, pl contract.Placement, uid string) (string, error) {
	tags, metadata := uidOnlyMarks(uid)
	return k.bootForeign(ctx, name, pl, tags, metadata)
}

// bootForeign boots a server the operator did not make, which
// DeleteUnmarked may remove.
func (k *realControl) bootForeign(ctx context.Context, name string, pl contract.Placement, tags []string, metadata map[string]string) (string, error) {
	id, err := k.boot(ctx, name, tags, metadata, nil)
	if err != nil {
		return "", err
	}
	k.mu.Lock()
	if k.unmarked == nil {
		k.unmarked = map[string]bool{}
	}
	k.unmarked[id] = true
	k.mu.Unlock()
	return ids.Format(pl.Region, id), nil
}

// tagsOf reads a server's tags (nil before microversion 2.26).
func tagsOf(s *servers.Server) []string {
	if s.Tags == nil {
		return nil
	}
	return *s.Tags
}

// boot creates a server as the tenant's user, outside the wire.
func (k *realControl) boot(ctx context.Context, name string, tags []string, metadata map[string]string, userData []byte) (string, error) {
	c, err := k.member(ctx)
	if err != nil {
		return "", err
	}
	cfg := k.rc.tenant.cfg
	region := cfg.Regions["one"]
	opts := servers.CreateOpts{
		Name: name, FlavorRef: k.rc.tenant.flavorID, ImageRef: k.imageID(ctx),
		AvailabilityZone: region.Zones["zone"], Networks: []servers.Network{{UUID: region.Network}},
		Tags: tags, Metadata: metadata,
	}
	if userData != nil {
		opts.UserData = []byte(base64.StdEncoding.EncodeToString(userData))
	}
	s, err := servers.Create(ctx, c, opts, nil).Extract()
	if err != nil {
		return "", err
	}
	return s.ID, nil
}

// imageID resolves the lane's image as the provider does.
func (k *realControl) imageID(ctx context.Context) string {
	p, err := New(k.rc.tenant.cfg)
	if err != nil {
		return ""
	}
	id, err := p.lookupImage(ctx, "one", k.rc.tenant.cfg.Images["proxy"])
	if err != nil {
		k.t.Errorf("control: image %s: %v", k.rc.tenant.cfg.Images["proxy"], err)
	}
	return id
}

// DeleteUnmarked removes a server CreateUnmarked made and waits until it
// is gone; a server that carries marks is not the control's to remove.
func (k *realControl) DeleteUnmarked(ctx context.Context, providerID string) error {
	id, err := serverID(providerID)
	if err != nil {
		return err
	}
	s, err := servers.Get(ctx, k.rc.admin.compute, id).Extract()
	switch {
	case gophercloud.ResponseCodeIs(err, http.StatusNotFound):
		return contract.NotFound(fmt.Errorf("control: no server %s", id))
	case err != nil:
		return err
	case managedMarked(tagsOf(s), s.Metadata):
		return fmt.Errorf("server %s carries tags %v, metadata %v: not an unmarked server", id, s.Tags, s.Metadata)
	}
	if err := servers.Delete(ctx, k.rc.admin.compute, id).ExtractErr(); err != nil {
		return err
	}
	k.mu.Lock()
	delete(k.unmarked, id)
	k.mu.Unlock()
	return nil
}

// CreateLegacy boots the server as the previous release (contract v0.2)
// did: the managed and UID tags, no owner tag, the managed mark valued
// "true", with the provider's own metadata encoding (whatever the keys
// Nova takes are, the legacy server carries them).
func (k *realControl) CreateLegacy(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	legacy := req
	legacy.Owner = contract.LegacyManagedValue
	id, err := k.boot(ctx, req.Name, []string{tagManaged, tagUIDPrefix + req.UID}, markMetadata(legacy), req.CloudInit)
	if err != nil {
		return contract.Instance{}, err
	}
	return contract.Instance{ProviderID: ids.Format("one", id)}, nil
}

// Stall holds every call at the wire.
func (k *realControl) Stall() func() { return k.rc.wire.stall() }

// Calls counts the provider's calls at the wire.
func (k *realControl) Calls() int { return k.rc.wire.Calls() }

// CutCall cuts the n-th call at the wire with the load balancer's 502.
func (k *realControl) CutCall(n int, after bool) error {
	k.rc.wire.cutCall(n, after)
	return nil
}

// Reset drops the wire's cut and faults (putting back what a fault's
// admin change took away), lets stalled calls go, and gives the user back
// its role and account.
func (k *realControl) Reset() {
	k.rc.wire.reset()
	k.RejectCredentials(false)
}

// serverPathRE matches the server ID in a Nova URL, for the rewrites.
var serverPathRE = regexp.MustCompile(`/servers/[0-9a-f-]{36}$`)

// FailNext makes the next call serving op fail with the real service's
// own error where the control can cause it:
//   - ErrNotFound (get, delete): the request goes to a server ID that
//     does not exist, and Nova answers its own 404;
//   - ErrQuota (create): the admin sets the tenant's instances quota to 0,
//     Nova refuses the create with its 403, the quota is put back;
//   - ErrPermanent: create: the admin deletes the tenant's flavor, Nova
//     refuses the create with its 400, the flavor is made again under its
//     ID; get, list, delete: the request asks microversion 2.999, and Nova
//     answers its own 406;
//   - transient (nil): the load balancer answers 503, as while no API
//     backend is up; no request reaches the API.
func (k *realControl) FailNext(op contracttest.Op, class error) error {
	m := paths[op]
	f := &wireFault{method: m[0], path: regexp.MustCompile(m[1])}
	ctx := context.Background()
	switch {
	case class == nil:
		f.status, f.body = http.StatusServiceUnavailable, unavailable
	case errors.Is(class, contract.ErrNotFound):
		f.rewrite = func(r *http.Request) { r.URL.Path = serverPathRE.ReplaceAllString(r.URL.Path, "/servers/"+newUUID()) }
	case errors.Is(class, contract.ErrQuota) && op == contracttest.OpCreate:
		restore, err := k.zeroQuota(ctx)
		if err != nil {
			return err
		}
		f.undo = restore
	case errors.Is(class, contract.ErrPermanent) && op == contracttest.OpCreate:
		if err := flavors.Delete(ctx, k.rc.admin.compute, k.rc.tenant.flavorID).ExtractErr(); err != nil {
			return fmt.Errorf("delete flavor %s: %w", k.rc.tenant.flavorName, err)
		}
		f.undo = func() { k.rc.tenant.makeFlavor(k.t) }
	case errors.Is(class, contract.ErrPermanent):
		f.rewrite = func(r *http.Request) {
			r.Header.Set("X-OpenStack-Nova-API-Version", "2.999")
			r.Header.Set("OpenStack-API-Version", "compute 2.999")
		}
	default:
		return fmt.Errorf("control: no real fault of class %s for %s", contract.ClassOf(class), op)
	}
	k.rc.wire.add(f)
	return nil
}

// zeroQuota sets the tenant's instances quota to 0 and returns what puts
// the quota back.
func (k *realControl) zeroQuota(ctx context.Context) (func(), error) {
	a := k.rc.admin.compute
	q, err := quotasets.Get(ctx, a, k.rc.tenant.projectID).Extract()
	if err != nil {
		return nil, err
	}
	zero := 0
	// force: Nova refuses a limit below what is in use ("Quota limit 0 for
	// instances must be greater than or equal to already used and
	// reserved 1", nova/api/openstack/compute/quota_sets.py update) unless
	// forced; the harness's own server is in use.
	if _, err := quotasets.Update(ctx, a, k.rc.tenant.projectID, quotasets.UpdateOpts{Instances: &zero, Force: true}).Extract(); err != nil {
		return nil, err
	}
	was := q.Instances
	var once sync.Once
	return func() {
		once.Do(func() {
			if _, err := quotasets.Update(ctx, a, k.rc.tenant.projectID, quotasets.UpdateOpts{Instances: &was, Force: true}).Extract(); err != nil {
				k.t.Errorf("control: put back the instances quota: %v", err)
			}
		})
	}, nil
}

// FailAfterCreate lets Nova create the server and loses its answer at
// the wire.
func (k *realControl) FailAfterCreate() error {
	m := paths[contracttest.OpCreate]
	k.rc.wire.add(&wireFault{method: m[0], path: regexp.MustCompile(m[1]), lose: true})
	return nil
}

// RejectCredentials disables the tenant's user and takes its member role
// away, or enables it and grants the role again. Disabling the user
// persists a revocation event for every token issued to it
// (keystone/identity/core.py, Manager.update_user), but Nova's
// keystonemiddleware keeps a token's validation in its cache
// ([keystone_authtoken] token_cache_time, 300 s by default:
// keystonemiddleware/auth_token/_opts.py), so Nova goes on accepting a
// token it has seen for up to that long. The control waits until Nova
// refuses the provider's last token, as the harness asks for a backend
// that rejects the credential, and logs how long that took.
func (k *realControl) RejectCredentials(reject bool) {
	ctx := context.Background()
	enabled := !reject
	if _, err := users.Update(ctx, k.rc.admin.identity, k.rc.tenant.userID, users.UpdateOpts{Enabled: &enabled}).Extract(); err != nil {
		k.t.Errorf("control: user %s enabled=%v: %v", k.rc.tenant.name, enabled, err)
	}
	k.rc.tenant.grant(k.t, !reject)
	if !reject {
		return
	}
	token := k.rc.wire.lastToken()
	if token == "" {
		return
	}
	if waited, ok := k.rc.waitNovaRefuses(ctx, token); ok {
		k.t.Logf("control: Nova refused the provider's token %s after the user was disabled", waited)
	} else {
		k.t.Errorf("control: Nova still accepts the provider's token %s after the user was disabled", waited)
	}
}

// waitNovaRefuses polls Nova with token until it answers 401, for at most
// six minutes (Nova's keystonemiddleware keeps a validated token for
// [keystone_authtoken] token_cache_time: 300 s by default, 10 s on the
// lane). It reports how long it waited and whether Nova refused.
func (rc *realCloud) waitNovaRefuses(ctx context.Context, token string) (time.Duration, bool) {
	start := time.Now()
	for deadline := start.Add(6 * time.Minute); ; time.Sleep(2 * time.Second) {
		if rc.novaStatus(ctx, token) == http.StatusUnauthorized {
			return time.Since(start).Round(time.Second), true
		}
		if time.Now().After(deadline) {
			return time.Since(start).Round(time.Second), false
		}
	}
}

// novaStatus is Nova's status for a server list with the token (0 when
// the request fails).
func (rc *realCloud) novaStatus(ctx context.Context, token string) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rc.admin.compute.ServiceURL("servers")+"?limit=1", nil)
	if err != nil {
		return 0
	}
	req.Header.Set("X-Auth-Token", token)
	resp, err := rc.admin.http.Do(req)
	if err != nil {
		return 0
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// UserData is the user_data Nova hands the guest's metadata service,
// read by the admin (OS-EXT-SRV-ATTR:user_data, microversion 2.3 and
// later).
func (k *realControl) UserData(ctx context.Context, providerID string) ([]byte, error) {
	id, err := serverID(providerID)
	if err != nil {
		return nil, err
	}
	// ExtractInto unwraps the "server" object itself.
	var body struct {
		UserData *string `json:"OS-EXT-SRV-ATTR:user_data"`
	}
	if err := servers.Get(ctx, k.rc.admin.compute, id).ExtractInto(&body); err != nil {
		return nil, err
	}
	if body.UserData == nil {
		return nil, fmt.Errorf("control: Nova shows the admin no OS-EXT-SRV-ATTR:user_data for server %s", id)
	}
	return base64.StdEncoding.DecodeString(*body.UserData)
}

// Resources lists the tenant's servers and its ports on the network, but
// the servers CreateUnmarked made while they carry no marks.
func (k *realControl) Resources(ctx context.Context) ([]string, error) {
	a := k.rc.admin
	pages, err := servers.List(a.compute, servers.ListOpts{AllTenants: true, TenantID: k.rc.tenant.projectID}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	all, err := servers.ExtractServers(pages)
	if err != nil {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	skip := map[string]bool{}
	for _, s := range all {
		if k.unmarked[s.ID] && (s.Tags == nil || len(*s.Tags) == 0) && len(s.Metadata) == 0 {
			skip[s.ID] = true
			continue
		}
		out = append(out, "server "+s.ID+" "+s.Name)
	}
	pp, err := ports.List(a.network, ports.ListOpts{ProjectID: k.rc.tenant.projectID, NetworkID: k.rc.tenant.network}).AllPages(ctx)
	if err != nil {
		return nil, err
	}
	ps, err := ports.ExtractPorts(pp)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if strings.HasPrefix(p.DeviceOwner, "network:") {
			continue // the network's own ports (DHCP, router) are no lifecycle's
		}
		if skip[p.DeviceID] {
			continue
		}
		out = append(out, "port "+p.ID+" of "+p.DeviceID)
	}
	return out, nil
}
