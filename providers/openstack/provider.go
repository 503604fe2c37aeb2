// Package openstack is the egress-proxies provider for OpenStack, on
// gophercloud v2: it boots proxy servers with Nova from a Glance image,
// hands them cloud-init as Nova user_data, marks them with server tags
// (and metadata), and reads their address from Nova. docs/openstack-provider-spec.md
// gives every decision and its reason; docs/openstack-provider.md is the
// guide. Package osfake is the stateful fake of Keystone, Nova and Glance
// the tests run against.
package openstack

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Type is the provider's type in the providers config.
const Type = "openstack"

// The marks. Nova tags cannot hold "/" or "," and are at most 60
// characters, so the contract's keys are mapped (gc-mark: native-labels;
// ListByTag filters on them with tags=); metadata carries the contract's
// keys and values beside them, "/" written as ":" (metaKey): LabelManaged's
// value, the Owner, is read from there, as a long Owner's tag holds only
// part of it.
//
// tagManaged is on every server this operator made, whatever its
// release; tagOwnerPrefix+<owner> names the install and entry that made
// it (see ownerTag). A server with tagManaged and no owner tag was made
// before marks named their owner (contract v0.2); its metadata says
// "true", contract.LegacyManagedValue.
const (
	tagManaged     = "egressproxies-managed"
	tagOwnerPrefix = "egressproxies-owner-"
	tagUIDPrefix   = "egressproxies-uid-"
	maxTag         = 60
	// maxUID is the longest UID a tag can hold; a Kubernetes UID has 36
	// characters.
	maxUID = maxTag - len(tagUIDPrefix)
)

// computeMicroversion is the Nova API version every compute call asks
// for: 2.52 is the first that takes tags on create, so a server is never
// visible without its marks.
const computeMicroversion = "2.52"

// MaxCloudInit bounds CloudInit: Nova's request schema takes user_data of
// at most 65535 base64 characters, which hold 49149 bytes.
const MaxCloudInit = 65535 / 4 * 3

var ids = contract.IDFormat{
	Location: keyRE,
	Key:      regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
}

var (
	_ contract.Provider     = (*Provider)(nil)
	_ contract.EgressKeeper = (*Provider)(nil)
	_ contract.Checker      = (*Provider)(nil)
)

// Create finds the Proxy's server or boots it (create-return: submit;
// each step resumes a cut-off attempt, template entry 10):
//  1. list the region's servers tagged with the marks (tags=), managed
//     by any owner (the previous release's too); one of this name that is
//     not deleted or being deleted → resume; an unmarked server of the same name is
//     never listed, so never adopted;
//  2. resolve the flavor and image by name (cached);
//  3. create it, with the marks as tags and metadata and the cloud-init as
//     user_data, in one request (microversion 2.52);
//  4. read it back for its state and creation time.
//
// A server found in ERROR is deleted and its fault returned (see
// instanceOrFault), so a later Create boots a fresh one.
func (p *Provider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	plan, err := p.plan(req)
	if err != nil {
		return contract.Instance{}, err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, req.Name)
	ctx = logr.NewContext(ctx, log)

	// Nova allows any number of servers of one name: two Creates of one
	// request that both list before either creates would make two. This
	// provider's Creates of one request take turns, so the later one finds
	// the earlier one's server (Nova lists a server with its tags from the
	// moment it accepted it, build request included).
	key := plan.regionKey + "/" + req.Name + "/" + req.UID
	done, err := p.creating.lock(ctx, key)
	if err != nil {
		return contract.Instance{}, fmt.Errorf("wait for another Create of %s: %w", req.Name, err)
	}
	defer done()

	found, err := p.listTagged(ctx, plan.regionKey, tagManaged+","+tagUIDPrefix+req.UID)
	if err != nil {
		return contract.Instance{}, err
	}
	if s, ok := earliest(found, req); ok {
		p.settleDoubt(key)
		log.V(contract.LogStep).Info("found the instance of an earlier attempt", "server", s.ID)
		return p.instanceOrFault(ctx, plan.regionKey, s, true)
	}
	if err := p.waitOutDoubt(key, req.Name); err != nil {
		return contract.Instance{}, err
	}
	flavorID, imageID, err := p.resolve(ctx, plan)
	if err != nil {
		return contract.Instance{}, err
	}
	ex, err := p.prepareExtras(ctx, plan, req)
	if err != nil {
		// A refusal partway (the floating IP's lookup or the server
		// group's create refused after the port was made) leaves no
		// server to hold what was made before it (§4.10).
		p.undoExtras(ctx, plan, ex, err)
		return contract.Instance{}, err
	}
	id, err := p.createServer(ctx, key, plan, req, ex, flavorID, imageID)
	if isStatus(err, 400) {
		// A flavor or image replaced under its name (an image rotated:
		// the old one deleted, Nova answers "Can not find requested
		// image"): look them up afresh, and submit once more if that
		// finds other IDs. The 400 stands when it does not.
		p.forgetRefs(plan.regionKey)
		f, i, rerr := p.resolve(ctx, plan)
		if rerr != nil {
			return contract.Instance{}, rerr
		}
		if f != flavorID || i != imageID {
			log.V(contract.LogStep).Info("flavor or image replaced under its name; creating with the new", "flavor", f, "image", i)
			flavorID, imageID = f, i
			id, err = p.createServer(ctx, key, plan, req, ex, flavorID, imageID)
		}
	}
	if err != nil {
		p.undoExtras(ctx, plan, ex, err)
		return contract.Instance{}, err
	}
	log.V(contract.LogOutcome).Info("created instance", "server", id, "flavor", flavorID, "image", imageID)
	s, err := p.getServer(ctx, plan.regionKey, id)
	if err != nil {
		return contract.Instance{}, err
	}
	return p.instanceOrFault(ctx, plan.regionKey, s, true)
}

// createServer submits the server: one POST /servers with everything in
// it, so the server is never visible without its marks. It has
// createTimeout, and a submission whose answer never came is recorded in
// doubt under key (indoubt.go).
func (p *Provider) createServer(ctx context.Context, key string, plan plan, req contract.CreateRequest, ex extras, flavorID, imageID string) (string, error) {
	var id string
	submitted := time.Now()
	err := p.doWithin(ctx, p.cfg.CreateTimeout.Duration, "CreateServer", plan.regionKey, func(ctx context.Context, c *clients) error {
		opts := servers.CreateOpts{
			Name: req.Name, FlavorRef: flavorID, ImageRef: imageID, AvailabilityZone: plan.zone,
			Networks:       []servers.Network{{UUID: plan.region.Network}},
			SecurityGroups: plan.region.SecurityGroups,
			// Encoded here: gophercloud sends bytes that already are
			// valid base64 as they are, which would hand such a
			// cloud-init to the guest decoded.
			UserData: []byte(base64.StdEncoding.EncodeToString(req.CloudInit)),
			Tags:     markTags(req),
			Metadata: markMetadata(req),
		}
		s, err := servers.Create(ctx, c.compute, opts, ex.apply(&opts)).Extract()
		if err != nil {
			return err
		}
		id = s.ID
		return nil
	})
	if err != nil {
		p.doubt(key, submitted, err)
	}
	return id, err
}

// keyLocks is one lock per key, made on first use and dropped when no
// caller holds or waits for it. A waiter whose ctx ends gives up at once
// (contract §1.5).
type keyLocks struct {
	mu    sync.Mutex
	locks map[string]*keyLock
}

type keyLock struct {
	slot  chan struct{}
	users int // holders and waiters
}

// lock takes key's lock and returns its release, or ctx's error.
func (k *keyLocks) lock(ctx context.Context, key string) (unlock func(), err error) {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyLock{slot: make(chan struct{}, 1)}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	leave := func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
	}
	select {
	case l.slot <- struct{}{}:
		return func() { <-l.slot; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, ctx.Err()
	}
}

// earliest is the oldest server of the request's name carrying its marks
// and not deleted or being deleted: the one an earlier attempt made (two
// exist only if two Creates for one Proxy raced; the other is collected).
// A soft-deleted server (SOFT_DELETED, on a cloud with
// reclaim_instance_interval) is still listed with its tags and no task, so
// the state, not only task_state, tells it apart.
func earliest(found []servers.Server, req contract.CreateRequest) (servers.Server, bool) {
	var best servers.Server
	ok := false
	for _, s := range found {
		if state, _, _ := stateOf(s); state == contract.StateTerminated {
			continue
		}
		if s.Name == req.Name && owned(s, req.UID) && (!ok || s.Created.Before(best.Created)) {
			best, ok = s, true
		}
	}
	return best, ok
}

// instanceOrFault returns the server as an Instance. Nova never retries an
// ERROR server, so one whose build failed is deleted and its fault
// returned: for want of capacity as ErrQuota (the operator backs off and
// creates again once Get reports it gone), for any other reason as
// ErrPermanent (the same request fails the same way: the Proxy shows
// Nova's fault and the operator tries again only after its permanent
// wait, rather than replacing the server in a loop). For Create (anyFault)
// every ERROR server is deleted and its fault returned, so Create never
// hands back a dead server; Get reports a server that ran and then went
// to ERROR as Stopped, which the operator replaces.
func (p *Provider) instanceOrFault(ctx context.Context, regionKey string, s servers.Server, anyFault bool) (contract.Instance, error) {
	// A build that failed never launched (nova/compute/manager.py sets
	// launched_at only once the hypervisor has spawned the guest).
	fault := &FaultError{ServerID: s.ID, Fault: s.Fault, BuildFailed: s.LaunchedAt.IsZero()}
	if s.Status != "ERROR" || s.TaskState == "deleting" || (!anyFault && !fault.Capacity() && !fault.BuildFailed) {
		inst := instance(regionKey, s)
		if inst.State == contract.StateTerminated {
			return inst, nil
		}
		var err error
		inst.EgressIP, err = p.egressOf(ctx, regionKey, s.Metadata)
		return inst, err
	}
	log := logr.FromContextOrDiscard(ctx)
	if err := p.deleteServer(ctx, regionKey, s); err != nil {
		log.Error(err, "could not delete a server whose build failed; next attempt deletes it", "server", s.ID)
	} else {
		log.V(contract.LogOutcome).Info("deleted a server whose build failed", "server", s.ID, "fault", s.Fault.Message)
		p.deleteServerGroupAfterFault(ctx, regionKey, s)
		if err := p.deletePortOf(ctx, regionKey, s.Metadata); err != nil {
			log.Error(err, "could not delete the port of a failed server; the next Create uses it", "port", s.Metadata[metaPort])
		}
	}
	return contract.Instance{}, classify(fault)
}

// plan is a validated request resolved against the catalogues.
type plan struct {
	regionKey string
	region    Region
	zone      string
	flavor    string
	image     string
}

// plan validates req before any call (contract §1.2).
func (p *Provider) plan(req contract.CreateRequest) (plan, error) {
	if err := req.Validate(); err != nil {
		return plan{}, err
	}
	if len(req.UID) > maxUID {
		return plan{}, contract.InvalidField("uid", req.UID, fmt.Sprintf("at most %d characters, to fit a Nova tag", maxUID))
	}
	pl := req.Placement
	region, flavor, image, err := contract.LookupPlacement(pl, p.cfg.Regions, p.cfg.MachineTypes, p.cfg.Images)
	if err != nil {
		return plan{}, err
	}
	zone, err := contract.LookupZone(region.Zones, pl.Zone)
	if err != nil {
		return plan{}, err
	}
	if err := contract.CloudInitFits(req.CloudInit, MaxCloudInit, "Nova user_data"); err != nil {
		return plan{}, err
	}
	return plan{regionKey: pl.Region, region: region, zone: zone, flavor: flavor, image: image}, nil
}

// Get reads the server. A server whose build failed for want of capacity
// is deleted and reported as ErrQuota (see instanceOrFault).
func (p *Provider) Get(ctx context.Context, providerID string) (contract.Instance, error) {
	regionKey, id, err := p.parse(providerID)
	if err != nil {
		return contract.Instance{}, err
	}
	ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID))
	s, err := p.getServer(ctx, regionKey, id)
	if err != nil {
		return contract.Instance{}, err
	}
	if mayBeGoing(s, time.Now().UTC()) {
		going, err := p.deleteRecorded(ctx, regionKey, id)
		if err != nil {
			return contract.Instance{}, err
		}
		if going {
			return p.goingAfterDelete(ctx, regionKey, s), nil
		}
	}
	return p.instanceOrFault(ctx, regionKey, s, false)
}

func (p *Provider) getServer(ctx context.Context, regionKey, id string) (servers.Server, error) {
	var s *servers.Server
	err := p.do(ctx, "GetServer", regionKey, func(ctx context.Context, c *clients) (err error) {
		s, err = servers.Get(ctx, c.compute, id).Extract()
		return err
	})
	if err != nil {
		return servers.Server{}, err
	}
	return *s, nil
}

// Delete deletes the server's group and the port of its static address
// (ports.go), then the server; Nova deletes the port it made for a
// server without one (delete-return: returns-early; Get reports
// Terminated while task_state is deleting). A server already gone or
// being deleted is success. A server Nova is still scheduling is deleted
// once it is placed (scheduling.go).
func (p *Provider) Delete(ctx context.Context, providerID string) error {
	regionKey, id, err := ids.Parse(providerID)
	if err != nil {
		return err
	}
	log := logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, providerID)
	if _, ok := p.cfg.Regions[regionKey]; !ok {
		log.Info("region is no longer configured; nothing to delete", "region", regionKey)
		return nil
	}
	ctx = logr.NewContext(ctx, log)
	s, err := p.getServer(ctx, regionKey, id)
	if err == nil {
		s, err = p.waitScheduled(ctx, regionKey, s)
	}
	if err == nil {
		err = p.deleteServerGroupOf(ctx, regionKey, s)
	}
	if err == nil {
		// Nova would leave the port (ports.go); deleting it first keeps
		// Delete resumable from the providerID.
		err = p.deletePortOf(ctx, regionKey, s.Metadata)
	}
	if err == nil {
		err = p.deleteServer(ctx, regionKey, s)
	}
	if errors.Is(err, contract.ErrNotFound) {
		log.V(contract.LogStep).Info("instance already gone")
		return nil
	}
	if err != nil {
		return err
	}
	log.V(contract.LogOutcome).Info("deleting instance")
	return nil
}

// deleteServer deletes the server. On a cloud with soft delete
// (reclaim_instance_interval > 0) a DELETE of a server that has run only
// soft-deletes it: SOFT_DELETED, listed with its marks and holding its
// quota until Nova reclaims it, hours later; a repeated DELETE
// soft-deletes it again (nova/api/openstack/compute/servers.py _delete),
// and its Proxy's finalizer would wait for the reclaim. forceDelete
// deletes a server in any vm_state, soft-deleted or not
// (nova/compute/api.py force_delete), and Nova's default policy lets a
// project member do it as it lets DELETE (nova/policies/deferred_delete.py,
// servers.py: PROJECT_MEMBER_OR_ADMIN). It wants no task in progress, so a
// server with one (building, or already deleting) gets DELETE, which takes
// any state and never soft-deletes one that never ran. A cloud whose
// policy refuses forceDelete refuses the Delete, naming the policy: a
// refused permission is never passed over (contract §5).
func (p *Provider) deleteServer(ctx context.Context, regionKey string, s servers.Server) error {
	del := func() error {
		return p.do(ctx, "DeleteServer", regionKey, func(ctx context.Context, c *clients) error {
			return servers.Delete(ctx, c.compute, s.ID).ExtractErr()
		})
	}
	if s.TaskState != "" {
		return del()
	}
	return p.do(ctx, "ForceDeleteServer", regionKey, func(ctx context.Context, c *clients) error {
		return servers.ForceDelete(ctx, c.compute, s.ID).ExtractErr()
	})
}

// ListByTag lists, region by region, the servers carrying the mark; Nova
// filters on the tags (list-partial: fail-whole). A LabelManaged list
// keeps only servers whose metadata holds exactly the value: an Owner's
// tag may be shared by another long Owner (ownerTag), and the legacy list
// asks Nova for every managed server, as no tag tells a legacy one.
func (p *Provider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	var tags string
	switch {
	case key == contract.LabelManaged && value == contract.LegacyManagedValue:
		tags = tagManaged
	case key == contract.LabelManaged:
		if value == "" || strings.ContainsAny(value, ",/") {
			return nil, contract.InvalidField("value", value, "an Owner: a DNS-1123 label")
		}
		tags = tagManaged + "," + ownerTag(value)
	case key == contract.LabelUID:
		if value == "" || len(value) > maxUID || strings.ContainsAny(value, ",/") {
			return nil, contract.InvalidField("value", value, fmt.Sprintf("a UID of at most %d characters without ',' or '/'", maxUID))
		}
		tags = tagManaged + "," + tagUIDPrefix + value
	default:
		return nil, contract.InvalidField("key", key, "one of "+contract.LabelManaged+", "+contract.LabelUID)
	}
	var out []contract.Instance
	for _, regionKey := range slices.Sorted(maps.Keys(p.cfg.Regions)) {
		found, err := p.listTagged(ctx, regionKey, tags)
		if err != nil {
			return nil, err
		}
		for _, s := range found {
			if key == contract.LabelManaged && ownerOf(s) != value {
				continue
			}
			out = append(out, instance(regionKey, s))
		}
	}
	return out, nil
}

// listTagged lists the region's servers carrying every tag of tags (a
// comma-separated list), all pages. The tags are checked again here: a
// Nova older than 2.26 would ignore the filter.
func (p *Provider) listTagged(ctx context.Context, regionKey, tags string) ([]servers.Server, error) {
	var all []servers.Server
	err := p.do(ctx, "ListServers", regionKey, func(ctx context.Context, c *clients) error {
		pages, err := servers.List(c.compute, servers.ListOpts{Tags: tags}).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err = servers.ExtractServers(pages)
		return err
	})
	if err != nil {
		return nil, err
	}
	want := strings.Split(tags, ",")
	return slices.DeleteFunc(all, func(s servers.Server) bool {
		return s.Tags == nil || !containsAll(*s.Tags, want)
	}), nil
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// parse checks a providerID and that its region is configured.
func (p *Provider) parse(providerID string) (string, string, error) {
	regionKey, id, err := ids.Parse(providerID)
	if err != nil {
		return "", "", err
	}
	if _, ok := p.cfg.Regions[regionKey]; !ok {
		return "", "", contract.InvalidField("providerID", providerID, "region "+regionKey+" is not configured")
	}
	return regionKey, id, nil
}

// markTags are the tags Create writes: the managed tag, the owner's and
// the UID's.
func markTags(req contract.CreateRequest) []string {
	return []string{tagManaged, ownerTag(req.Owner), tagUIDPrefix + req.UID}
}

// markMetadata is the metadata Create writes: the contract's marks, their
// keys as metaKey writes them.
func markMetadata(req contract.CreateRequest) map[string]string {
	return map[string]string{metaKey(contract.LabelManaged): req.Owner, metaKey(contract.LabelUID): req.UID}
}

// metaKey is a contract label as a Nova metadata key: Nova's schema takes
// keys of ^[a-zA-Z0-9-_:. ]{1,255}$ only (nova/api/validation/
// parameter_types.py, metadata) and refuses the whole create for any
// other, so the "/" of "egressproxies.io/managed" becomes ":". No server
// ever carried the contract's keys as they are: Nova refused every create
// that sent them, so there is nothing to read under the old keys.
func metaKey(label string) string { return strings.ReplaceAll(label, "/", ":") }

// ownerTag is the owner's tag: the Owner whole when it fits Nova's 60
// characters (an Owner of up to 40), else its first 31 characters, '-'
// and 8 hex digits of its SHA-256, so Owners sharing a long prefix still
// get tags of their own. ListByTag checks the whole Owner in the metadata.
func ownerTag(owner string) string {
	if len(tagOwnerPrefix)+len(owner) <= maxTag {
		return tagOwnerPrefix + owner
	}
	sum := sha256.Sum256([]byte(owner))
	keep := maxTag - len(tagOwnerPrefix) - 1 - 8
	return tagOwnerPrefix + owner[:keep] + "-" + hex.EncodeToString(sum[:4])
}

// ownerOf reads LabelManaged's value back from the server's metadata.
func ownerOf(s servers.Server) string { return s.Metadata[metaKey(contract.LabelManaged)] }

func owned(s servers.Server, uid string) bool {
	return s.Tags != nil && containsAll(*s.Tags, []string{tagManaged, tagUIDPrefix + uid})
}

// uidOf reads the UID back from the server's tag.
func uidOf(s servers.Server) string {
	if s.Tags == nil {
		return ""
	}
	for _, t := range *s.Tags {
		if uid, ok := strings.CutPrefix(t, tagUIDPrefix); ok {
			return uid
		}
	}
	return ""
}

func instance(regionKey string, s servers.Server) contract.Instance {
	state, ip, msg := stateOf(s)
	return contract.Instance{
		ProviderID: ids.Format(regionKey, s.ID), Name: s.Name, State: state, IP: ip,
		UID: uidOf(s), Owner: ownerOf(s), CreatedAt: s.Created, Message: msg,
	}
}

// do runs one step against the region's APIs: with the session, bounded
// by the call timeout, under a child span (the HTTP calls are its
// children), logged at the call tier, its error classified. An error of a
// call cut off by ctx wraps ctx's error.
func (p *Provider) do(ctx context.Context, name, regionKey string, fn func(context.Context, *clients) error) error {
	return p.doWithin(ctx, p.cfg.CallTimeout.Duration, name, regionKey, fn)
}

// doWithin is do with its own timeout.
func (p *Provider) doWithin(ctx context.Context, timeout time.Duration, name, regionKey string, fn func(context.Context, *clients) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	ctx, span := contract.StartSpan(ctx, "openstack."+name)
	start := time.Now()
	c, err := p.session(ctx, regionKey)
	if err == nil {
		err = fn(ctx, c)
	}
	if ctxErr := ctx.Err(); err != nil && ctxErr != nil && !errors.Is(err, ctxErr) {
		err = fmt.Errorf("%w (%w)", err, ctxErr)
	}
	err = classify(err)
	contract.EndSpan(span, err)
	logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("openstack call", "call", name, "region", regionKey, "duration", time.Since(start), "class", contract.ClassOf(err))
	if err != nil {
		return fmt.Errorf("openstack %s in region %s: %w", name, regionKey, err)
	}
	return nil
}
