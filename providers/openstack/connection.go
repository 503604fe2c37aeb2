package openstack

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/flavors"
	"github.com/gophercloud/gophercloud/v2/openstack/config/clouds"
	"github.com/gophercloud/gophercloud/v2/openstack/identity/v3/tokens"
	"github.com/gophercloud/gophercloud/v2/openstack/image/v2/images"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Provider is the OpenStack provider. One Keystone login serves every
// call (gophercloud logs in again when the token expires); it is made on
// first use and again when the clouds file changes.
type Provider struct {
	cfg    Config
	clouds contract.SecretFile

	// sem is held while the session is read or made (a login is a
	// network call): a channel, so a caller whose ctx ends while another
	// logs in returns at once (contract §1.5).
	sem     chan struct{}
	pc      *gophercloud.ProviderClient
	regions map[string]*clients

	// creating serialises this provider's Creates of one request
	// (contract §1.3, §4.1).
	creating keyLocks

	// wrapTransport, when set (by this package's real-cloud tests), wraps
	// the HTTP transport under the tracing wrapper: the one place a test
	// can sit between the provider and a real cloud it does not own, to
	// count, cut, stall or record the calls.
	wrapTransport func(http.RoundTripper) http.RoundTripper

	mu     sync.Mutex
	method string
	// projectID is the token's project: groups are looked up by name
	// in it alone, as Nova looks up a server's (securitygroups.go).
	projectID string
	// inDoubt holds, by Create key, when a server create whose answer
	// never came was submitted (indoubt.go).
	inDoubt map[string]time.Time
	// refs caches flavor and image IDs by region and name: they rarely
	// change, and a Create that Nova refuses with 400 drops the region's
	// entries, looks them up afresh and, if they changed, submits again.
	refs map[string]string
}

// clients are one region's service clients.
type clients struct {
	compute, image *gophercloud.ServiceClient
	// network is nil when the catalogue has no network endpoint; only a
	// managed security group needs it (securitygroups.go).
	network *gophercloud.ServiceClient
}

// New validates cfg and returns a provider. It neither reads the clouds
// file nor dials (contract §7).
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("openstack provider config: %w", err)
	}
	return &Provider{cfg: cfg.withDefaults(), clouds: contract.SecretFile{Path: cfg.CloudsFile}, sem: make(chan struct{}, 1), refs: map[string]string{}}, nil
}

// session returns the region's clients, logging in when there is no
// session or the clouds file changed.
func (p *Provider) session(ctx context.Context, regionKey string) (*clients, error) {
	select {
	case p.sem <- struct{}{}:
		defer func() { <-p.sem }()
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for the session: %w", ctx.Err())
	}
	if p.pc == nil || p.clouds.Changed() {
		if err := p.login(ctx); err != nil {
			return nil, err
		}
	}
	if c := p.regions[regionKey]; c != nil {
		return c, nil
	}
	c, err := p.regionClients(ctx, regionKey)
	if err != nil {
		return nil, err
	}
	p.regions[regionKey] = c
	return c, nil
}

// regionClients makes the region's service clients. gophercloud may read
// an endpoint's version document to do so (Glance's catalogue entry
// carries no version) with a context of its own, so the work runs aside
// and ctx bounds the wait (contract §1.5); the transport's response
// header timeout bounds the request left behind.
func (p *Provider) regionClients(ctx context.Context, regionKey string) (*clients, error) {
	eo := gophercloud.EndpointOpts{Region: p.cfg.Regions[regionKey].Name, Availability: gophercloud.Availability(p.cfg.Interface)}
	pc := p.pc
	type result struct {
		c   *clients
		err error
	}
	done := make(chan result, 1)
	go func() {
		compute, err := openstack.NewComputeV2(pc, eo)
		if err != nil {
			done <- result{err: fmt.Errorf("no %s compute endpoint for region %q in the catalogue: %w", eo.Availability, eo.Region, err)}
			return
		}
		compute.Microversion = computeMicroversion
		image, err := openstack.NewImageV2(pc, eo)
		if err != nil {
			done <- result{err: fmt.Errorf("no %s image v2 endpoint for region %q in the catalogue: %w", eo.Availability, eo.Region, err)}
			return
		}
		network, err := openstack.NewNetworkV2(pc, eo)
		if err != nil {
			network = nil
		}
		done <- result{c: &clients{compute: compute, image: image, network: network}}
	}()
	select {
	case r := <-done:
		var notFound *gophercloud.ErrEndpointNotFound
		if errors.As(r.err, &notFound) {
			return nil, contract.Permanent(r.err)
		}
		return r.c, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("find the endpoints of region %q: %w", eo.Region, ctx.Err())
	}
}

// login reads the clouds file and authenticates. Called with p.sem held.
func (p *Provider) login(ctx context.Context) error {
	content, err := p.clouds.Read()
	if err != nil {
		return err
	}
	ao, err := parseClouds(content, p.cfg.Cloud, p.cfg.CloudsFile)
	if err != nil {
		return err
	}
	hc, err := p.httpClient()
	if err != nil {
		return err
	}
	pc, err := openstack.NewClient(ao.IdentityEndpoint)
	if err != nil {
		return contract.Permanentf("%s: auth_url: %w", p.cfg.CloudsFile, err)
	}
	pc.HTTPClient = hc
	pc.UserAgent.Prepend("egress-proxies-operator")
	ao.AllowReauth = true
	if err := openstack.Authenticate(ctx, pc, ao); err != nil {
		return classify(fmt.Errorf("log in to %s: %w", hostOf(ao.IdentityEndpoint), err))
	}
	method := "password"
	if ao.ApplicationCredentialID != "" || ao.ApplicationCredentialName != "" {
		method = "application_credential"
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("logged in", "identity", hostOf(ao.IdentityEndpoint), "method", method)
	project, err := tokenProject(pc)
	if err != nil {
		return err
	}
	p.pc, p.regions = pc, map[string]*clients{}
	p.mu.Lock()
	p.method, p.projectID = method, project
	p.mu.Unlock()
	return nil
}

// tokenProject is the ID of the project the login's token is scoped to.
// An unscoped token (a clouds entry without a project) cannot make
// servers, and is refused here with what to set.
func tokenProject(pc *gophercloud.ProviderClient) (string, error) {
	scoped, ok := pc.GetAuthResult().(interface {
		ExtractProject() (*tokens.Project, error)
	})
	if !ok {
		return "", contract.Permanentf("the login's token names no project: Keystone v3 is required")
	}
	project, err := scoped.ExtractProject()
	if err != nil || project == nil || project.ID == "" {
		return "", contract.Permanentf("the login's token is scoped to no project: set auth.project_name or auth.project_id in the clouds file")
	}
	return project.ID, nil
}

// project is the token's project ID.
func (p *Provider) project() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.projectID
}

// yamlLineRE finds the line a YAML error points at; the rest of the text
// is dropped, as a YAML error can quote a value (a password).
var yamlLineRE = regexp.MustCompile(`line \d+`)

// parseClouds reads one cloud's auth options from clouds.yaml content;
// no other file is read (no secure.yaml, no public clouds).
func parseClouds(content, cloud, path string) (gophercloud.AuthOptions, error) {
	ao, _, _, err := clouds.Parse(
		clouds.WithCloudsYAML(strings.NewReader(content)),
		clouds.WithCloudsPublicYAML(strings.NewReader("public-clouds: {}")),
		clouds.WithCloudName(cloud),
	)
	if err != nil {
		where := strings.Join(yamlLineRE.FindAllString(err.Error(), 3), ", ")
		if strings.Contains(err.Error(), "not found in clouds.yaml") {
			where = "no cloud " + cloud
		}
		return ao, contract.Permanentf("clouds file %s: cannot read cloud %q (%s)", path, cloud, where)
	}
	if ao.IdentityEndpoint == "" {
		return ao, contract.Permanentf("clouds file %s: cloud %q has no auth.auth_url", path, cloud)
	}
	if ao.ApplicationCredentialSecret == "" && ao.Password == "" {
		return ao, contract.Permanentf("clouds file %s: cloud %q has neither application_credential_secret nor password", path, cloud)
	}
	return ao, nil
}

// httpClient is the client every call goes through: TLS as configured,
// and an otelhttp transport that makes each request a child span of the
// step's span when there is one (child-spans: transport-wrapper).
func (p *Provider) httpClient() (http.Client, error) {
	tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: p.cfg.InsecureSkipTLSVerify} //nolint:gosec // an explicit, documented lab setting
	if p.cfg.CAFile != "" {
		pem, err := os.ReadFile(p.cfg.CAFile)
		if err != nil {
			return http.Client{}, contract.Permanentf("caFile: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return http.Client{}, contract.Permanentf("caFile %s: no PEM certificate in it", p.cfg.CAFile)
		}
		tlsCfg.RootCAs = pool
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	base.TLSClientConfig = tlsCfg
	// Each call's context bounds it; this bounds a request gophercloud
	// sends with a context of its own, and must let a create through.
	base.ResponseHeaderTimeout = max(p.cfg.CallTimeout.Duration, p.cfg.CreateTimeout.Duration)
	var rt http.RoundTripper = base
	if p.wrapTransport != nil {
		rt = p.wrapTransport(base)
	}
	return http.Client{Transport: otelhttp.NewTransport(rt,
		otelhttp.WithFilter(func(r *http.Request) bool { return trace.SpanFromContext(r.Context()).SpanContext().IsValid() }),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string { return "openstack HTTP " + r.Method }),
	)}, nil
}

func hostOf(u string) string {
	_, rest, _ := strings.Cut(u, "://")
	host, _, _ := strings.Cut(rest, "/")
	return host
}

// resolve returns the flavor's and image's IDs for the plan, from the
// cache or looked up.
func (p *Provider) resolve(ctx context.Context, pl plan) (flavorID, imageID string, err error) {
	if flavorID, err = p.cached(pl.regionKey+"\x00flavor\x00"+pl.flavor, func() (string, error) {
		return p.lookupFlavor(ctx, pl.regionKey, pl.flavor)
	}); err != nil {
		return "", "", err
	}
	imageID, err = p.cached(pl.regionKey+"\x00image\x00"+pl.image, func() (string, error) {
		return p.lookupImage(ctx, pl.regionKey, pl.image)
	})
	return flavorID, imageID, err
}

func (p *Provider) cached(key string, lookup func() (string, error)) (string, error) {
	p.mu.Lock()
	v, ok := p.refs[key]
	p.mu.Unlock()
	if ok {
		return v, nil
	}
	v, err := lookup()
	if err != nil {
		return "", err
	}
	p.mu.Lock()
	p.refs[key] = v
	p.mu.Unlock()
	return v, nil
}

func (p *Provider) forgetRefs(regionKey string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for k := range p.refs {
		if strings.HasPrefix(k, regionKey+"\x00") {
			delete(p.refs, k)
		}
	}
}

// lookupFlavor finds the flavor of that name in the region.
func (p *Provider) lookupFlavor(ctx context.Context, regionKey, name string) (id string, err error) {
	err = p.do(ctx, "ListFlavors", regionKey, func(ctx context.Context, c *clients) error {
		pages, err := flavors.ListDetail(c.compute, nil).AllPages(ctx)
		if err != nil {
			return err
		}
		all, err := flavors.ExtractFlavors(pages)
		if err != nil {
			return err
		}
		for _, f := range all {
			if f.Name == name {
				id = f.ID
				return nil
			}
		}
		return contract.Permanentf("flavor %q does not exist in region %q", name, p.cfg.Regions[regionKey].Name)
	})
	return id, err
}

// lookupImage finds the active image of that ID, or the one active image
// of that name, in the region.
func (p *Provider) lookupImage(ctx context.Context, regionKey, ref string) (id string, err error) {
	region := p.cfg.Regions[regionKey].Name
	err = p.do(ctx, "FindImage", regionKey, func(ctx context.Context, c *clients) error {
		var found []images.Image
		if uuidRE.MatchString(ref) {
			img, err := images.Get(ctx, c.image, ref).Extract()
			if isStatus(err, 404) {
				return contract.Permanentf("image %q does not exist in region %q", ref, region)
			}
			if err != nil {
				return err
			}
			found = []images.Image{*img}
		} else {
			pages, err := images.List(c.image, images.ListOpts{Name: ref}).AllPages(ctx)
			if err != nil {
				return err
			}
			if found, err = images.ExtractImages(pages); err != nil {
				return err
			}
		}
		var active []string
		for _, img := range found {
			if img.Status == images.ImageStatusActive {
				active = append(active, img.ID)
			}
		}
		switch len(active) {
		case 1:
			id = active[0]
			return nil
		case 0:
			return contract.Permanentf("no active image %q in region %q", ref, region)
		default:
			return contract.Permanentf("image name %q matches %d active images in region %q; give its ID", ref, len(active), region)
		}
	})
	return id, err
}
