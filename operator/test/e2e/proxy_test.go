//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

const proxyPort = 3128

// TestProxyBecomesAVM applies a Proxy with no cloud-init of its own and
// follows it to a running QEMU domain whose proxy carries a request to the
// origin on the bridge, refuses a client outside its allowed networks,
// and leaves no domain or volume behind when the Proxy is deleted.
func TestProxyBecomesAVM(t *testing.T) {
	l := laneFromEnv(t)
	begin := time.Now()
	k8s, kubeconfig := startCluster(t, l)
	imageURL, imageSHA := serveImage(t, l.Image)
	org := startOrigin(t, l.HostIP)
	credentials, uri := writeCredentials(t, l)
	startOperator(t, l, kubeconfig, writeProvidersConfig(t, l, uri, imageURL, imageSHA), credentials)
	t.Logf("control plane, image server, origin %s and operator (libvirt at %s) up after %s", org.URL, uri, since(begin))

	ctx := t.Context()
	proxy := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: "egress", Namespace: "default"},
		Spec: v1alpha1.ProxySpec{
			Provider:       providerName,
			Placement:      v1alpha1.Placement{Region: region, MachineType: machineType, Image: imageKey},
			Port:           proxyPort,
			AllowedClients: []v1alpha1.CIDR{v1alpha1.CIDR(l.Subnet)},
		},
	}
	if err := k8s.Create(ctx, proxy); err != nil {
		t.Fatalf("create the Proxy: %v", err)
	}
	created := time.Now()
	ready, createdVM, addressed := waitReady(ctx, t, k8s, client.ObjectKeyFromObject(proxy), 15*time.Minute)
	readyAt := time.Now()
	addr, instance := ready.Status.Address, ready.Status.Instance.Name
	t.Logf("Proxy Ready at %s (VM %s) %s after create", addr, instance, readyAt.Sub(created).Round(time.Millisecond))

	// The VM is a real domain with its overlay and seed in the pool.
	if state := virsh(t, l, "domstate", instance); state != "running\n" {
		t.Errorf("domain %s: state %q, want running", instance, state)
	}
	overlay, seed := instance+".qcow2", instance+"-seed.iso"
	vols := volumes(t, l)
	for _, v := range []string{overlay, seed} {
		if !slices.Contains(vols, v) {
			t.Errorf("volume %s is not in pool %s: %v", v, l.Pool, vols)
		}
	}

	// A request through the proxy reaches the origin, from the VM.
	path := "/through-the-proxy"
	resp := firstProxied(t, addr, org.URL+path, "", 2*time.Minute)
	firstAt := time.Now()
	t.Logf("first proxied request %s after Ready: %s %q", firstAt.Sub(readyAt).Round(time.Millisecond), resp.status, resp.body)
	if resp.code != http.StatusOK || resp.body != org.body(path) {
		t.Errorf("through the proxy: %s %q, want 200 %q", resp.status, resp.body, org.body(path))
	}
	if got := org.sources(path); !slices.Equal(got, []string{addr}) {
		t.Errorf("the origin saw the request from %v, want only from the VM %s", got, addr)
	}
	// The proxy announces itself as HTTP requires (RFC 9110 §7.6.3): Via
	// names the host the operator's cloud-init set, the Proxy's name, so
	// the answer came through the proxy the operator configured, not
	// Debian's stock one (port 8888, loopback only).
	if via := resp.header.Get("Via"); !strings.Contains(via, proxy.Name) || !strings.Contains(via, "tinyproxy") {
		t.Errorf("Via %q: want the proxy's hostname %q and tinyproxy", via, proxy.Name)
	}

	// A client outside the allowed networks is refused by the proxy.
	refusedPath := "/from-outside"
	refused := firstProxied(t, addr, org.URL+refusedPath, l.OutsideIP, time.Minute)
	if refused.code != http.StatusForbidden {
		t.Errorf("from %s, outside %s: %s %q, want 403", l.OutsideIP, l.Subnet, refused.status, refused.body)
	}
	if got := org.sources(refusedPath); len(got) != 0 {
		t.Errorf("the origin saw the refused client's request from %v", got)
	}
	t.Logf("from %s (outside %s): %s", l.OutsideIP, l.Subnet, refused.status)

	// The health checker reaches the same daemon and finds it usable.
	checkProviderHealth(ctx, t, k8s, time.Minute)

	// Deleting the Proxy deletes the domain, its overlay and its seed.
	deleting := time.Now()
	if err := k8s.Delete(ctx, proxy); err != nil {
		t.Fatalf("delete the Proxy: %v", err)
	}
	waitGone(ctx, t, k8s, client.ObjectKeyFromObject(proxy), 5*time.Minute)
	deleted := time.Now()
	if ds := domains(t, l); slices.Contains(ds, instance) {
		t.Errorf("domain %s is still defined after the Proxy was deleted: %v", instance, ds)
	}
	vols = volumes(t, l)
	for _, v := range []string{overlay, seed} {
		if slices.Contains(vols, v) {
			t.Errorf("volume %s is still in pool %s after the Proxy was deleted: %v", v, l.Pool, vols)
		}
	}
	t.Logf("Proxy deleted in %s; left in pool %s: %v", deleted.Sub(deleting).Round(time.Millisecond), l.Pool, vols)

	timings := fmt.Sprintf("created_to_ready=%s (create_returned=%s address=%s)\nready_to_first_request=%s\ndelete=%s\ndriver_total=%s\n",
		readyAt.Sub(created).Round(time.Millisecond), createdVM.Sub(created).Round(time.Second), addressed.Sub(created).Round(time.Second),
		firstAt.Sub(readyAt).Round(time.Millisecond),
		deleted.Sub(deleting).Round(time.Millisecond), since(begin))
	if err := os.WriteFile(filepath.Join(l.State, "timings"), []byte(timings), 0o644); err != nil {
		t.Error(err)
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Millisecond) }

// waitReady polls the Proxy until its Ready condition is true with an
// address and an instance, logging each phase it passes. A Failed phase
// ends the wait at once.
//
// It also returns when Create returned (the instance has a providerID:
// image fetched, domain defined and started) and when the VM first had an
// address (booted, DHCP lease), each as seen by a 1 s poll.
func waitReady(ctx context.Context, t *testing.T, k8s client.Client, key client.ObjectKey, limit time.Duration) (_ *v1alpha1.Proxy, createdVM, addressed time.Time) {
	t.Helper()
	start := time.Now()
	last := ""
	for {
		var p v1alpha1.Proxy
		if err := k8s.Get(ctx, key, &p); err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		reason := ""
		if cond != nil {
			reason = cond.Reason + ": " + cond.Message
		}
		if inst := p.Status.Instance; inst != nil {
			if inst.ProviderID != "" && createdVM.IsZero() {
				createdVM = time.Now()
				t.Logf("+%s Create returned: %s", since(start), inst.ProviderID)
			}
			if inst.IP != "" && addressed.IsZero() {
				addressed = time.Now()
				t.Logf("+%s the VM has the address %s", since(start), inst.IP)
			}
		}
		if now := fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Address, reason); now != last {
			t.Logf("+%s %s", since(start), now)
			last = now
		}
		if cond != nil && cond.Status == metav1.ConditionTrue && p.Status.Address != "" && p.Status.Instance != nil {
			return &p, createdVM, addressed
		}
		if p.Status.Phase == v1alpha1.PhaseFailed {
			t.Fatalf("the Proxy failed: %s (last error %+v)", reason, p.Status.LastError)
		}
		if time.Since(start) > limit {
			t.Fatalf("the Proxy is not Ready after %s: %s", limit, last)
		}
		time.Sleep(time.Second)
	}
}

// checkProviderHealth waits for the provider's ProviderHealth to carry
// checks, and requires every one to be OK.
func checkProviderHealth(ctx context.Context, t *testing.T, k8s client.Client, limit time.Duration) {
	t.Helper()
	start := time.Now()
	var ph v1alpha1.ProviderHealth
	for {
		err := k8s.Get(ctx, client.ObjectKey{Name: providerName}, &ph)
		if err == nil && len(ph.Status.Checks) > 0 {
			break
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get the ProviderHealth: %v", err)
		}
		if time.Since(start) > limit {
			t.Errorf("no ProviderHealth %s with checks after %s", providerName, limit)
			return
		}
		time.Sleep(time.Second)
	}
	for _, c := range ph.Status.Checks {
		t.Logf("ProviderHealth %s: %s ok=%t %s %s", providerName, c.Target, c.OK, c.Reason, c.Message)
		if !c.OK {
			t.Errorf("ProviderHealth %s: check %s is not OK: %s %s", providerName, c.Target, c.Reason, c.Message)
		}
	}
}

// waitGone polls until the Proxy is gone (its finalizer ran).
func waitGone(ctx context.Context, t *testing.T, k8s client.Client, key client.ObjectKey, limit time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		err := k8s.Get(ctx, key, &v1alpha1.Proxy{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		if time.Since(start) > limit {
			t.Fatalf("the Proxy is still there %s after delete", limit)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

type answer struct {
	code         int
	status, body string
	header       http.Header
}

// firstProxied sends GET target through the proxy at addr until an HTTP
// answer comes (the proxy's port may lag its readiness by a moment),
// from the address from when set. Each attempt is a new connection.
func firstProxied(t *testing.T, addr, target, from string, limit time.Duration) answer {
	t.Helper()
	proxyURL := &url.URL{Scheme: "http", Host: net.JoinHostPort(addr, strconv.Itoa(proxyPort))}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	if from != "" {
		dialer.LocalAddr = &net.TCPAddr{IP: net.ParseIP(from)}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(proxyURL), DialContext: dialer.DialContext, DisableKeepAlives: true,
	}}
	start := time.Now()
	for {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, target, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if rerr == nil {
				return answer{code: resp.StatusCode, status: resp.Status, body: string(body), header: resp.Header}
			}
			err = rerr
		}
		if time.Since(start) > limit {
			t.Fatalf("no answer through the proxy %s after %s: %v", proxyURL, limit, err)
		}
		time.Sleep(time.Second)
	}
}
