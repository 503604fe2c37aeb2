package openstack

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/openstack"
	"github.com/gophercloud/gophercloud/v2/openstack/compute/v2/servers"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/providers/openstack/osfake"
)

// replay answers every request with one captured response, so gophercloud
// builds its error exactly as it does from the real service.
func replay(t *testing.T, status int, body string) *gophercloud.ServiceClient {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(s.Close)
	return &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{}, Endpoint: s.URL + "/compute/v2.1/", Type: "compute", Microversion: computeMicroversion}
}

// captured returns the error gophercloud returns for a GET of a server
// answered with status and body. gophercloud's ErrUnexpectedResponseCode
// is a struct value holding a slice, which errors.Is cannot compare, so
// the row carries it wrapped once, as it travels through the provider;
// errors.As still reaches it.
func captured(t *testing.T, status int, body string) error {
	t.Helper()
	_, err := servers.Get(context.Background(), replay(t, status, body), "9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3").Extract()
	if err == nil {
		t.Fatalf("a %d answer gave no error", status)
	}
	return fmt.Errorf("get server: %w", err)
}

// TestClassify classifies the responses of the Nova API reference (bodies
// in nova/exception.py's words; see osfake's constants), and errors
// provoked for real: a login Keystone refuses, a token revoked with the
// credential, a certificate not trusted, a connection refused, a
// cancelled call.
func TestClassify(t *testing.T) {
	const faults = "Compute API guide, Faults (https://docs.openstack.org/api-guide/compute/faults.html); "
	c := startCloud(t)

	wrongLogin := func() error {
		pc, err := openstack.NewClient(c.fake.AuthURL())
		if err != nil {
			t.Fatal(err)
		}
		hc, err := c.provider(t).httpClient()
		if err != nil {
			t.Fatal(err)
		}
		pc.HTTPClient = hc
		return fmt.Errorf("log in: %w", openstack.Authenticate(context.Background(), pc, gophercloud.AuthOptions{
			IdentityEndpoint: c.fake.AuthURL(), ApplicationCredentialID: testAppCredID, ApplicationCredentialSecret: "wrong",
		}))
	}()

	p := c.provider(t)
	if _, err := p.ListByTag(context.Background(), contract.LabelManaged, testOwner); err != nil {
		t.Fatal(err)
	}
	cl, err := p.session(context.Background(), "one")
	if err != nil {
		t.Fatal(err)
	}
	c.fake.RejectCredentials(true)
	_, revoked := servers.Get(context.Background(), cl.compute, "9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3").Extract()
	c.fake.RejectCredentials(false)

	untrusted := func() error {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, c.fake.AuthURL(), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			t.Fatal("the fake's certificate was trusted by the system roots")
		}
		return err
	}()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	refused := func() error {
		_, err := servers.Get(context.Background(), &gophercloud.ServiceClient{ProviderClient: &gophercloud.ProviderClient{}, Endpoint: closed.URL + "/"}, "x").Extract()
		return err
	}()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, cancelled := servers.Get(ctx, cl.compute, "9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3").Extract()

	contracttest.RunClassifyTable(t, classify, []contracttest.ClassifyCase{
		{Name: "404 itemNotFound", Err: captured(t, 404, osfake.NotFoundBody), Want: contract.ErrNotFound, Source: faults + "InstanceNotFound"},
		{Name: "403 instance quota", Err: captured(t, 403, osfake.QuotaBody), Want: contract.ErrQuota, Source: faults + "TooManyInstances"},
		{Name: "403 cores quota", Err: captured(t, 403, `{"forbidden": {"code": 403, "message": "Quota exceeded for cores: Requested 2, but already used 20 of 20 cores"}}`), Want: contract.ErrQuota, Source: faults + "TooManyInstances"},
		{Name: "403 port quota", Err: captured(t, 403, `{"forbidden": {"code": 403, "message": "Maximum number of ports exceeded"}}`), Want: contract.ErrQuota, Source: faults + "PortLimitExceeded"},
		{Name: "403 metadata quota", Err: captured(t, 403, `{"forbidden": {"code": 403, "message": "Maximum number of metadata items exceeds 128"}}`), Want: contract.ErrQuota, Source: faults + "MetadataLimitExceeded"},
		{Name: "403 policy", Err: captured(t, 403, osfake.PolicyBody), Want: contract.ErrPermanent, Source: faults + "PolicyNotAuthorized"},
		{Name: "413 quota (pre-2.1 API)", Err: captured(t, 413, `{"overLimit": {"code": 413, "message": "Quota exceeded for instances: Requested 1, but already used 10 of 10 instances"}}`), Want: contract.ErrQuota, Source: faults + "the v2 API's overLimit for a quota"},
		{Name: "413 rate limited", Err: captured(t, 413, `{"overLimit": {"code": 413, "message": "This request was rate-limited.", "retryAfter": "59"}}`), Want: nil, Source: faults + "Limits (rate limits)"},
		{Name: "429 rate limited", Err: captured(t, 429, osfake.RateLimitBody), Want: nil, Source: faults + "overLimit"},
		{Name: "409 locked", Err: captured(t, 409, osfake.ConflictBody), Want: contract.ErrPermanent, Source: "nova/compute/api.py check_instance_lock (InstanceIsLocked): a person must unlock it"},
		{Name: "409 task in progress", Err: captured(t, 409, `{"conflictingRequest": {"code": 409, "message": "Cannot 'update tag' instance 9b7c1c42-5c0e-4d0b-a0f6-46a4b8a5e0f3 while it is in vm_state building"}}`), Want: nil, Source: "nova/api/openstack/common.py raise_http_conflict_for_instance_invalid_state"},
		{Name: "409 Neutron over quota", Err: captured(t, 409, `{"NeutronError": {"type": "OverQuota", "message": "Quota exceeded for resources: ['security_group'].", "detail": ""}}`), Want: contract.ErrQuota, Source: "neutron_lib/exceptions OverQuota (a Conflict, 409), as the lane's Neutron answered a managed group's create"},
		{Name: "409 Neutron network exhausted", Err: captured(t, 409, `{"NeutronError": {"type": "IpAddressGenerationFailure", "message": "No more IP addresses available on network 5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10.", "detail": ""}}`), Want: contract.ErrQuota, Source: "neutron/db/ipam_pluggable_backend.py _ipam_allocate_ips (IpAddressGenerationFailure, a Conflict): a port or floating IP on a full network"},
		{Name: "400 Neutron external network exhausted", Err: captured(t, 400, `{"NeutronError": {"type": "ExternalIpAddressExhausted", "message": "Unable to find any IP address on external network 5b3c3a52-4c5e-4c44-9a5c-7b0e2d6f9a10.", "detail": ""}}`), Want: contract.ErrQuota, Source: "neutron/db/l3_db.py _create_floatingip (ExternalIpAddressExhausted, a BadRequest)"},
		{Name: "409 security group name ambiguous", Err: captured(t, 409, `{"conflictingRequest": {"code": 409, "message": "Multiple security groups found matching 'proxy'. Use an ID to be more specific."}}`), Want: contract.ErrPermanent, Source: "nova/network/neutron.py _process_security_groups (NoUniqueMatch)"},
		{Name: "409 network ambiguous", Err: captured(t, 409, `{"conflictingRequest": {"code": 409, "message": "More than one possible network found. Specify network ID(s) to select which one(s) to connect to."}}`), Want: contract.ErrPermanent, Source: "nova.exception.NetworkAmbiguous, servers.py create"},
		{Name: "409 allocation delete failed", Err: captured(t, 409, osfake.AllocationConflictBody), Want: nil, Source: "nova.exception.AllocationDeleteFailed, servers.py delete"},
		{Name: "400 bad flavor", Err: captured(t, 400, `{"badRequest": {"code": 400, "message": "Flavor 99 could not be found."}}`), Want: contract.ErrPermanent, Source: "nova/api/openstack/compute/servers.py create, FlavorNotFound"},
		{Name: "406 microversion", Err: captured(t, 406, `{"computeFault": {"code": 406, "message": "Version 2.94 is not supported by the API. Minimum is 2.1 and maximum is 2.93."}}`), Want: contract.ErrPermanent, Source: "Nova Zed on the OpenStack lane, GET /servers at 2.94"},
		{Name: "500 computeFault", Err: captured(t, 500, osfake.ServerErrorBody), Want: nil, Source: faults + "an unexpected API error"},
		{Name: "503 unavailable", Err: captured(t, 503, osfake.UnavailableBody), Want: nil, Source: faults + "serviceUnavailable"},
		{Name: "ERROR server, NoValidHost", Err: &FaultError{ServerID: "9b7c1c42", Fault: servers.Fault{Code: 500, Message: osfake.NoValidHost}}, Want: contract.ErrQuota, Source: "Compute API guide, Server concepts (fault of an ERROR server)"},
		{Name: "ERROR server, retries exhausted", Err: &FaultError{ServerID: "9b7c1c42", BuildFailed: true, Fault: servers.Fault{Code: 500, Message: "Exceeded maximum number of retries. Exhausted all hosts available for retrying build failures for instance 9b7c1c42."}}, Want: contract.ErrPermanent, Source: "nova.exception.MaxRetriesExceeded (conductor/manager.py): every host failed the build; on the lane a PortBindingFailed read so"},
		{Name: "ERROR server, build aborted (network)", Err: &FaultError{ServerID: "9b7c1c42", BuildFailed: true, Fault: servers.Fault{Code: 500, Message: "Build of instance 9b7c1c42 aborted: Failed to allocate the network(s), not rescheduling."}}, Want: contract.ErrPermanent, Source: "nova/compute/manager.py _build_and_run_instance (BuildAbortException)"},
		{Name: "ERROR server, build aborted (subnet full)", Err: &FaultError{ServerID: "9b7c1c42", BuildFailed: true, Fault: servers.Fault{Code: 500, Message: "Build of instance 9b7c1c42 aborted: Failed to allocate the network(s) with error No fixed IP addresses available for network: 5d1c, not rescheduling."}}, Want: contract.ErrQuota, Source: "nova/compute/manager.py _build_and_run_instance (NoMoreFixedIps)"},
		{Name: "ERROR server that ran", Err: &FaultError{ServerID: "9b7c1c42", Fault: servers.Fault{Code: 500, Message: "Unexpected error while resizing"}}, Want: nil, Source: "a server replaced by the next Create"},
		{Name: "401 login refused", Err: wrongLogin, Want: contract.ErrPermanent, Source: "Identity API v3, POST /v3/auth/tokens 401, through osfake and gophercloud"},
		{Name: "token revoked, login refused", Err: fmt.Errorf("get server: %w", revoked), Want: contract.ErrPermanent, Source: "keystonemiddleware 401, then a refused login (ErrUnableToReauthenticate), through osfake"},
		{Name: "certificate not trusted", Err: untrusted, Want: contract.ErrPermanent, Source: "crypto/x509 against osfake's TLS server"},
		{Name: "connection refused", Err: fmt.Errorf("get server: %w", refused), Want: nil, Source: "net/http against a closed port"},
		{Name: "cancelled ctx", Err: fmt.Errorf("get server: %w", cancelled), Want: nil, Source: "context package through gophercloud"},
	})
}
