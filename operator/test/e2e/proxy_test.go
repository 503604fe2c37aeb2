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

	discoveryv1 "k8s.io/api/discovery/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

const proxyPort = 3128

// TestProxyBecomesAVM installs the operator from the release manifest as
// a Pod of the lane's node, applies an AddressPool and a Proxy of it with
// no cloud-init of its own, sees its address in the status before any
// domain exists, and follows it to a running QEMU domain at exactly that
// address (no DHCP lease) whose proxy carries a request from a client
// Pod, through the Proxy's Service name, to the origin on the bridge,
// which sees that address; refuses a client outside its allowed
// networks; replaces the VM for a port change, break-before-make, on the
// same address, measuring the outage; runs two replicas, each on its own
// address, rolls them and scales back to one with no request through the
// Service failing (rollReplicas); survives the leader's crash in the
// middle of a second Proxy's (DHCP) provisioning with one VM for it; and
// leaves no domain or volume behind when the Proxies are deleted, the
// address released only after its VM is gone.
func TestProxyBecomesAVM(t *testing.T) {
	l := laneFromEnv(t)
	begin := time.Now()
	k8s, cs := connect(t, l)
	imageURL, imageSHA, imageGate := serveImage(t, l.Image, l.HostIP)
	org := startOrigin(t, l.HostIP)
	t.Cleanup(func() { saveOperatorLogs(l, "operator.log") })
	providersConfig := writeProvidersConfig(t, l, podURI(l), imageURL, imageSHA)
	installed := installOperator(t, l, providersConfig)
	t.Logf("operator installed from %s and rolled out in %s (libvirt at %s); origin %s",
		l.Manifest, installed.Round(time.Millisecond), podURI(l), org.URL)

	ctx := t.Context()
	applyAddressPool(ctx, t, k8s, l)
	proxy := newProxy("egress", l)
	proxy.Spec.AddressPool = poolName
	if err := k8s.Create(ctx, proxy); err != nil {
		t.Fatalf("create the Proxy: %v", err)
	}
	created := time.Now()

	// The address is in the status before the VM exists. The image server
	// holds the first download, which libvirt's Create makes before it
	// defines a domain (imageGate), until this is checked: an operator
	// that wrote the address only after Create would never show it here.
	allocated := waitAllocated(ctx, t, k8s, client.ObjectKeyFromObject(proxy), 2*time.Minute)
	allocatedAt := time.Now()
	addr := allocated.Status.Addresses[0]
	if ds := domains(t, l); len(ds) != 0 {
		t.Errorf("domains defined when status.addresses first showed %s: %v, want none", addr, ds)
	}
	if inst := allocated.Status.Instance; inst != nil && inst.ProviderID != "" {
		t.Errorf("the instance has the providerID %s when status.addresses first showed %s: the VM was made first", inst.ProviderID, addr)
	}
	t.Logf("status.addresses %v %s after create, phase %s, no domain defined (Create had begun: %t)",
		allocated.Status.Addresses, allocatedAt.Sub(created).Round(time.Millisecond), allocated.Status.Phase, imageGate.asked())
	pa := checkProxyAddress(ctx, t, k8s, l, proxy, addr)
	imageGate.open()

	ready, createdVM, addressed := waitReady(ctx, t, k8s, client.ObjectKeyFromObject(proxy), 15*time.Minute)
	readyAt := time.Now()
	instance := ready.Status.Instance.Name
	t.Logf("Proxy Ready at %s (VM %s) %s after create, %s after its address was known", ready.Status.Address, instance,
		readyAt.Sub(created).Round(time.Millisecond), readyAt.Sub(allocatedAt).Round(time.Millisecond))
	// Ready at exactly the allocated address, as the VM reports it.
	if ready.Status.Address != addr || ready.Status.Instance.IP != addr || !slices.Equal(ready.Status.Addresses, []string{addr}) {
		t.Errorf("Ready with address %q, instance IP %q, addresses %v; want all %s", ready.Status.Address,
			ready.Status.Instance.IP, ready.Status.Addresses, addr)
	}
	checkStaticOnDomain(t, l, instance, addr)

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

	// A client Pod reaches the origin through the Proxy's Service name:
	// cluster DNS, the Service and EndpointSlice the operator wrote, the
	// node's kube-proxy, and the route from the Pod network to the VM.
	podPath := "/from-a-pod"
	serviceURL := fmt.Sprintf("http://%s.%s.svc:%d", proxy.Name, proxy.Namespace, proxyPort)
	ok, out, podTook := runClientPod(ctx, t, cs, l, proxy.Namespace, "client", serviceURL, org.URL+podPath)
	firstAt := time.Now()
	t.Logf("client Pod through %s: %s after Ready, the Pod ran %s:\n%s", serviceURL,
		firstAt.Sub(readyAt).Round(time.Millisecond), podTook.Round(time.Millisecond), out)
	if !ok || !strings.Contains(out, "status: 200 OK") || !strings.Contains(out, org.body(podPath)) {
		t.Errorf("the client Pod did not get the origin's answer through %s:\n%s", serviceURL, out)
	}
	if got := org.sources(podPath); !slices.Equal(got, []string{addr}) {
		t.Errorf("the origin saw the Pod's request from %v, want only from the VM %s", got, addr)
	}
	// The proxy announces itself as HTTP requires (RFC 9110 §7.6.3): Via
	// names the host the operator's cloud-init set, the Proxy's name, so
	// the answer came through the proxy the operator configured, not
	// Debian's stock one (port 8888, loopback only).
	if !strings.Contains(out, "via: ") || !strings.Contains(out, proxy.Name) || !strings.Contains(out, "tinyproxy") {
		t.Errorf("the answer's Via does not name the proxy %q and tinyproxy:\n%s", proxy.Name, out)
	}

	// A client outside the allowed networks is refused by the proxy.
	refusedPath := "/from-outside"
	refused := firstProxied(t, addr, org.URL+refusedPath, l.OutsideIP, time.Minute)
	if refused.code != http.StatusForbidden {
		t.Errorf("from %s, outside %s and %s: %s %q, want 403", l.OutsideIP, l.Subnet, l.PodCIDR, refused.status, refused.body)
	}
	if got := org.sources(refusedPath); len(got) != 0 {
		t.Errorf("the origin saw the refused client's request from %v", got)
	}
	t.Logf("from %s (outside the allowed clients): %s", l.OutsideIP, refused.status)

	// A port change replaces the VM, break-before-make, on the same
	// address. A client of the address sends requests all along, on the
	// old port and the new; the outage is from its last answer on the old
	// to its first on the new.
	newPort := proxyPort + 1
	probePath := "/during-replace"
	probes := startProber(t, addr, []int{proxyPort, newPort}, org.URL+probePath, 250*time.Millisecond)
	within(t, time.Minute, 100*time.Millisecond, "the prober gets an answer from the serving VM", func() (bool, string) {
		return probes.answeredOn(proxyPort), fmt.Sprintf("%d probes", len(probes.results()))
	})
	patch := client.MergeFrom(ready.DeepCopy())
	changed := ready.DeepCopy()
	changed.Spec.Port = int32(newPort)
	if err := k8s.Patch(ctx, changed, patch); err != nil {
		t.Fatalf("change the Proxy's port to %d: %v", newPort, err)
	}
	replacing := time.Now()
	rep := waitReplaced(t, k8s, l, client.ObjectKeyFromObject(proxy), instance, 15*time.Minute)
	replacedAt := time.Now()
	within(t, time.Minute, 100*time.Millisecond, "the prober gets an answer on the new port", func() (bool, string) {
		return probes.answeredOn(newPort), fmt.Sprintf("%d probes", len(probes.results()))
	})
	probes.halt()
	sw := switchoverOf(probes.results(), proxyPort, newPort)
	newInstance := rep.proxy.Status.Instance.Name
	t.Logf("replaced %s by %s: Ready %s after the port change (old domain gone after %s, new defined after %s); "+
		"outage %s (last answer on :%d %s after the change, first on :%d %s after it; %d failed probes between)",
		instance, newInstance, replacedAt.Sub(replacing).Round(time.Millisecond), rep.oldGone.Sub(replacing).Round(time.Second),
		rep.newDefined.Sub(replacing).Round(time.Second), sw.outage().Round(time.Millisecond), proxyPort,
		sw.lastOld.Sub(replacing).Round(time.Millisecond), newPort, sw.firstNew.Sub(replacing).Round(time.Millisecond), sw.failed)
	if sw.oldAfterNew {
		t.Errorf("the old port %d answered after the new port %d had: two VMs served %s at once", proxyPort, newPort, addr)
	}
	if got := rep.proxy.Status; got.Address != addr || got.Instance.IP != addr || !slices.Equal(got.Addresses, []string{addr}) {
		t.Errorf("after the replacement: address %q, instance IP %q, addresses %v; want all %s", got.Address, got.Instance.IP, got.Addresses, addr)
	}
	// The address was never released and allocated again: the same
	// ProxyAddress object holds it.
	if after := checkProxyAddress(ctx, t, k8s, l, proxy, addr); after.UID != pa.UID {
		t.Errorf("the ProxyAddress %s was made again during the replacement (uid %s, then %s)", pa.Name, pa.UID, after.UID)
	}
	for _, src := range org.sources(probePath) {
		if src != addr {
			t.Errorf("the origin saw a request of the replacement's prober from %s, want only %s", src, addr)
			break
		}
	}
	checkStaticOnDomain(t, l, newInstance, addr)
	if ds := domains(t, l); !slices.Equal(ds, []string{newInstance}) {
		t.Errorf("domains after the replacement: %v, want only %s", ds, newInstance)
	}
	vols = volumes(t, l)
	for _, v := range []string{overlay, seed} {
		if slices.Contains(vols, v) {
			t.Errorf("the replaced domain's volume %s is still in pool %s: %v", v, l.Pool, vols)
		}
	}
	// A client Pod through the Service, on the new port: the origin
	// again sees exactly the same address.
	afterPath := "/after-replace"
	serviceURL = fmt.Sprintf("http://%s.%s.svc:%d", proxy.Name, proxy.Namespace, newPort)
	ok, out, _ = runClientPod(ctx, t, cs, l, proxy.Namespace, "client-after-replace", serviceURL, org.URL+afterPath)
	if !ok || !strings.Contains(out, "status: 200 OK") || !strings.Contains(out, org.body(afterPath)) {
		t.Errorf("after the replacement the client Pod did not get the origin's answer through %s:\n%s", serviceURL, out)
	}
	if got := org.sources(afterPath); !slices.Equal(got, []string{addr}) {
		t.Errorf("after the replacement the origin saw the Pod's request from %v, want only from %s", got, addr)
	}
	t.Logf("after the replacement a client Pod through %s reached the origin from %v", serviceURL, org.sources(afterPath))

	// Two replicas, each on its own address, rolled one at a time and
	// scaled back to one while a client of the Service sends requests.
	rr := rollReplicas(t, k8s, cs, l, org, rep.proxy, addr)
	newInstance = rr.instance

	// The health checker reaches the same daemon and finds it usable.
	checkProviderHealth(ctx, t, k8s, time.Minute)
	// The metrics endpoint answers its scrapers, and only them.
	checkMetrics(t, l)

	// Debian's Prometheus scrapes the replicas as the monitoring kit's
	// ServiceMonitor says and evaluates its alerts (their `for` cut to
	// seconds): the kills below must make them fire, and clear.
	prom := startPrometheus(t, l, cs)
	prom.waitQuiet(t, alertNoLeader, nil, time.Minute)

	// The leader crashes while a second Proxy is provisioning: the other
	// replica takes the Lease and finishes it, with one VM.
	// It lets out only the origin's address and port (docs/egress.md).
	// It lives in a Namespace that binds its Pods to it (docs/egress.md).
	second := withEgressToOrigin(t, newProxy("egress-2", l), org)
	second.Namespace = boundNamespace
	createBoundNamespace(ctx, t, cs, second.Name)
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatalf("create the second Proxy: %v", err)
	}
	secondCreated := time.Now()
	waitCreating(ctx, t, k8s, client.ObjectKeyFromObject(second), 2*time.Minute)
	killing := time.Now()
	killed, next, takeover := killLeader(ctx, t, cs)
	t.Logf("%s took the Lease %s after the leader %s was killed", next, takeover.Round(time.Millisecond), killed)
	noLeader := prom.firedAndCleared(t, alertNoLeader, nil, killing, 2*time.Minute)
	if took := killing.Add(takeover); !noLeader.first.Before(took) {
		t.Errorf("%s first fired at %s, after the takeover at %s: it did not fire while no replica led",
			alertNoLeader, noLeader.first.UTC().Format(time.RFC3339Nano), took.UTC().Format(time.RFC3339Nano))
	}
	t.Logf("%s fired %s after the kill (for %s in the lane), last fired %s after it, clear by %s (the takeover at %s)",
		alertNoLeader, noLeader.first.Sub(killing).Round(time.Millisecond), laneFor, noLeader.last.Sub(killing).Round(time.Millisecond),
		noLeader.cleared.Sub(killing).Round(time.Millisecond), takeover.Round(time.Millisecond))
	secondReady, _, _ := waitReady(ctx, t, k8s, client.ObjectKeyFromObject(second), 15*time.Minute)
	secondReadyAt := time.Now()
	t.Logf("second Proxy Ready at %s (VM %s) %s after create", secondReady.Status.Address,
		secondReady.Status.Instance.Name, secondReadyAt.Sub(secondCreated).Round(time.Millisecond))
	if ds, want := domains(t, l), []string{newInstance, secondReady.Status.Instance.Name}; !sameSet(ds, want) {
		t.Errorf("domains after the leader's crash: %v, want exactly %v", ds, want)
	}
	checkEgress(t, cs, l, org, secondReady)
	checkTraffic(t, l, secondReady)
	checkBinding(t, cs, l, org, secondReady)

	// The second Proxy's only VM dies: the Proxy is not Ready until its
	// replica is made again, and its alert fires for that time.
	secondLabels := map[string]string{"namespace": second.Namespace, "proxy": second.Name}
	prom.waitQuiet(t, alertNotReady, secondLabels, time.Minute)
	vmKilled := killReplica(t, k8s, cs, l, secondReady, 0)
	notReady := prom.firedAndCleared(t, alertNotReady, secondLabels, vmKilled.killed, 2*time.Minute)
	if back := vmKilled.killed.Add(vmKilled.replaced); !notReady.first.Before(back) {
		t.Errorf("%s first fired at %s, after the Proxy answered again at %s", alertNotReady,
			notReady.first.UTC().Format(time.RFC3339Nano), back.UTC().Format(time.RFC3339Nano))
	}
	t.Logf("%s for %s/%s fired %s after its VM was killed, last fired %s after it, clear by %s (answering again at %s)",
		alertNotReady, second.Namespace, second.Name, notReady.first.Sub(vmKilled.killed).Round(time.Millisecond),
		notReady.last.Sub(vmKilled.killed).Round(time.Millisecond), notReady.cleared.Sub(vmKilled.killed).Round(time.Millisecond),
		vmKilled.replaced.Round(time.Millisecond))
	// The kit's dashboard shows what the lane did, for both Proxies'
	// namespaces.
	prom.checkDashboard(t, l.Monitoring, []string{proxy.Namespace, second.Namespace})

	// Deleting the Proxies deletes their domains, overlays and seeds.
	deleting := time.Now()
	for _, p := range []*v1alpha1.Proxy{proxy, second} {
		if err := k8s.Delete(ctx, p); err != nil {
			t.Fatalf("delete the Proxy %s: %v", p.Name, err)
		}
	}
	// The address is released only once its VM is gone.
	vmGone, released := waitReleasedAfterVM(t, k8s, l, pa.Name, newInstance, 5*time.Minute)
	t.Logf("after the delete: domain %s gone at +%s, ProxyAddress %s released at +%s", newInstance,
		vmGone.Sub(deleting).Round(time.Millisecond), pa.Name, released.Sub(deleting).Round(time.Millisecond))
	for _, p := range []*v1alpha1.Proxy{proxy, second} {
		waitGone(ctx, t, k8s, client.ObjectKeyFromObject(p), 5*time.Minute)
	}
	deleted := time.Now()
	// The node's garbage collector (kube-controller-manager) removes the
	// Services and EndpointSlices through their owner references.
	for _, p := range []*v1alpha1.Proxy{proxy, second} {
		waitServiceCollected(ctx, t, cs, p, 2*time.Minute)
	}
	t.Logf("Services and EndpointSlices of both Proxies collected %s after the delete", since(deleting))
	if ds := domains(t, l); len(ds) != 0 {
		t.Errorf("domains left after the Proxies were deleted: %v", ds)
	}
	vols = volumes(t, l)
	for _, v := range vols {
		if strings.HasSuffix(v, "-seed.iso") || v == overlay || v == newInstance+".qcow2" {
			t.Errorf("volume %s is still in pool %s after the Proxies were deleted: %v", v, l.Pool, vols)
		}
	}
	t.Logf("Proxies deleted in %s; left in pool %s: %v", deleted.Sub(deleting).Round(time.Millisecond), l.Pool, vols)

	// The same operator from the release's Helm chart, on the same node:
	// the manifest's install deleted, the chart installed, a Proxy Ready
	// on a VM and deleted with it, the release uninstalled.
	uninstalled, chartInstalled := reinstallWithChart(t, l, providersConfig)
	chartReady, chartDeleted := chartProxy(t, k8s, l)
	chartUninstalled := uninstallChart(t, l)
	t.Logf("Helm: the manifest's install deleted in %s; the chart installed and every replica ready in %s; a Proxy Ready in %s and deleted in %s; helm uninstall %s",
		uninstalled.Round(time.Millisecond), chartInstalled.Round(time.Millisecond), chartReady.Round(time.Millisecond),
		chartDeleted.Round(time.Millisecond), chartUninstalled.Round(time.Millisecond))

	timings := fmt.Sprintf("install_to_rolled_out=%s\ncreated_to_address_known=%s\naddress_known_to_ready=%s\n"+
		"created_to_ready=%s (create_returned=%s address=%s)\nready_to_pod_answer=%s (pod ran %s)\n"+
		"replace_to_ready=%s\nreplace_outage=%s\n"+
		"replicas_scale_up=%s\nreplicas_roll=%s\nreplicas_scale_down=%s\nservice_requests=%d service_failed=%d\n"+
		"failover_endpoint_gone=%s failover_replaced=%s failover_requests=%d failover_failed=%d failover_last_failure=%s\n"+
		"release_after_vm_gone=%s\n"+
		"leader_takeover=%s\nsecond_created_to_ready=%s\ndelete=%s\n"+
		"alert_no_leader_fired=%s alert_no_leader_cleared=%s alert_not_ready_fired=%s alert_not_ready_cleared=%s\n"+
		"manifest_uninstall=%s chart_install=%s chart_proxy_ready=%s chart_proxy_delete=%s chart_uninstall=%s\ndriver_total=%s\n",
		installed.Round(time.Millisecond), allocatedAt.Sub(created).Round(time.Millisecond), readyAt.Sub(allocatedAt).Round(time.Millisecond),
		readyAt.Sub(created).Round(time.Millisecond), createdVM.Sub(created).Round(time.Second),
		addressed.Sub(created).Round(time.Second), firstAt.Sub(readyAt).Round(time.Millisecond), podTook.Round(time.Millisecond),
		replacedAt.Sub(replacing).Round(time.Millisecond), sw.outage().Round(time.Millisecond),
		rr.scaleUp.Round(time.Millisecond), rr.roll.Round(time.Millisecond), rr.scaleDown.Round(time.Millisecond), rr.sent, rr.failed,
		rr.failover.endpointGone.Round(time.Millisecond), rr.failover.replaced.Round(time.Millisecond), rr.failover.sent, rr.failover.failed,
		rr.failover.lastFailure.Round(time.Millisecond),
		released.Sub(vmGone).Round(time.Millisecond),
		takeover.Round(time.Millisecond), secondReadyAt.Sub(secondCreated).Round(time.Millisecond),
		deleted.Sub(deleting).Round(time.Millisecond),
		noLeader.first.Sub(killing).Round(time.Millisecond), noLeader.cleared.Sub(killing).Round(time.Millisecond),
		notReady.first.Sub(vmKilled.killed).Round(time.Millisecond), notReady.cleared.Sub(vmKilled.killed).Round(time.Millisecond),
		uninstalled.Round(time.Millisecond), chartInstalled.Round(time.Millisecond), chartReady.Round(time.Millisecond),
		chartDeleted.Round(time.Millisecond), chartUninstalled.Round(time.Millisecond), since(begin))
	if err := os.WriteFile(filepath.Join(l.State, "timings"), []byte(timings), 0o644); err != nil {
		t.Error(err)
	}
}

// newProxy is a Proxy on the lane's libvirt that lets the VM network and
// the node's Pods use it.
func newProxy(name string, l lane) *v1alpha1.Proxy {
	return &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.ProxySpec{
			Provider:       providerName,
			Placement:      v1alpha1.Placement{Region: region, MachineType: machineType, Image: imageKey},
			Port:           proxyPort,
			AllowedClients: []v1alpha1.CIDR{v1alpha1.CIDR(l.Subnet), v1alpha1.CIDR(l.PodCIDR)},
		},
	}
}

// sameSet reports whether a and b hold the same names, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// waitServiceCollected polls until the Proxy's Service and its
// EndpointSlices are gone.
func waitServiceCollected(ctx context.Context, t *testing.T, cs kubernetes.Interface, p *v1alpha1.Proxy, limit time.Duration) {
	t.Helper()
	within(t, limit, 500*time.Millisecond, "the Service "+p.Name+" and its EndpointSlices are collected", func() (bool, string) {
		_, err := cs.CoreV1().Services(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get the Service %s: %v", p.Name, err)
		}
		eps, lerr := cs.DiscoveryV1().EndpointSlices(p.Namespace).List(ctx, metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + p.Name})
		if lerr != nil {
			t.Fatalf("list the EndpointSlices of %s: %v", p.Name, lerr)
		}
		return apierrors.IsNotFound(err) && len(eps.Items) == 0,
			fmt.Sprintf("Service gone: %t, EndpointSlices left: %d", apierrors.IsNotFound(err), len(eps.Items))
	})
}

// waitCreating polls the Proxy until the operator has begun to make its
// VM: its Ready condition says Provisioning, which the operator sets
// before it calls Create (the message says "creating instance" while the
// call runs).
func waitCreating(ctx context.Context, t *testing.T, k8s client.Client, key client.ObjectKey, limit time.Duration) {
	t.Helper()
	start := time.Now()
	within(t, limit, 50*time.Millisecond, "the Proxy "+key.String()+" is provisioning", func() (bool, string) {
		var p v1alpha1.Proxy
		if err := k8s.Get(ctx, key, &p); err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		if cond == nil || cond.Reason != v1alpha1.ReasonProvisioning {
			return false, fmt.Sprintf("%+v", p.Status)
		}
		t.Logf("+%s %s %s: %s", since(start), p.Status.Phase, cond.Reason, cond.Message)
		return true, ""
	})
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
	within(t, limit, 500*time.Millisecond, "the Proxy "+key.String()+" is gone after delete", func() (bool, string) {
		err := k8s.Get(ctx, key, &v1alpha1.Proxy{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get the Proxy: %v", err)
		}
		return apierrors.IsNotFound(err), "still there"
	})
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
