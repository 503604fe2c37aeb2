package proxy

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/endpoints"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// The tests of what the operator may write in the cluster: only the
// Services and EndpointSlices it made (or an earlier release made), and
// only those in its cache.

// create makes obj and deletes it when the test ends.
func create(t *testing.T, obj client.Object) {
	t.Helper()
	if err := k8s.Create(context.Background(), obj); err != nil {
		t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
}

// collectOwned does what Kubernetes' garbage collector, which envtest
// does not run, does once a Proxy is gone: it deletes the Services and
// EndpointSlices whose owner references name the Proxy's UID. A later
// Proxy of the same name then meets no leftover of this one.
func collectOwned(t *testing.T, p *v1alpha1.Proxy) {
	t.Helper()
	ctx := context.Background()
	var services corev1.ServiceList
	var endpointSlices discoveryv1.EndpointSliceList
	if err := k8s.List(ctx, &services, client.InNamespace(p.Namespace)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.List(ctx, &endpointSlices, client.InNamespace(p.Namespace)); err != nil {
		t.Fatal(err)
	}
	var owned []client.Object
	for i := range services.Items {
		owned = append(owned, &services.Items[i])
	}
	for i := range endpointSlices.Items {
		owned = append(owned, &endpointSlices.Items[i])
	}
	for _, obj := range owned {
		if ownedBy(obj, p) {
			if err := k8s.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
				t.Errorf("collecting %s: %v", obj.GetName(), err)
			}
		}
	}
}

// userService is a Service someone made by hand: a selector, a port of
// its own, no owner.
func userService(namespace, name string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"team": "web"}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "web"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}},
		},
	}
}

// userSlice is an EndpointSlice someone made by hand for a Service of
// their own.
func userSlice(namespace, name, service string) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.7"}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](80), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// waitConflict waits until the Proxy reports a ServiceConflict whose
// message holds every one of want, and returns the message.
func waitConflict(t *testing.T, p *v1alpha1.Proxy, want ...string) string {
	t.Helper()
	var c metav1.Condition
	eventually(t, p.Name+" reports a ServiceConflict naming "+strings.Join(want, ", "), func() bool {
		c = readyCondition(get(t, p))
		if c.Reason != v1alpha1.ReasonServiceConflict || c.Status != metav1.ConditionFalse {
			return false
		}
		for _, w := range want {
			if !strings.Contains(c.Message, w) {
				return false
			}
		}
		return true
	})
	return c.Message
}

// ownedBy reports whether obj names the Proxy among its owners, so that
// deleting the Proxy would have Kubernetes delete obj.
func ownedBy(obj client.Object, p *v1alpha1.Proxy) bool {
	return slices.ContainsFunc(obj.GetOwnerReferences(), func(o metav1.OwnerReference) bool { return o.UID == p.UID })
}

// A Proxy named like a Service someone made leaves that Service exactly as
// it was — no selector or port replaced, no owner added, so deleting the
// Proxy does not delete it — makes no EndpointSlice feeding it, and says
// which object is in the way.
func TestUserServiceIsNeverTakenOver(t *testing.T) {
	ctx := context.Background()
	svc := userService(testNamespace, "yours")
	create(t, svc)
	before := svc.DeepCopy()

	p := newProxy(t, "yours", nil)
	bootGuest(t, p, current)
	msg := waitConflict(t, p, "Service default/yours", "not created by this operator")
	t.Logf("condition: %s", msg)
	eventually(t, "a ServiceConflict event", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool { return strings.HasPrefix(e, v1alpha1.ReasonServiceConflict+": ") })
	})
	if got := get(t, p); got.Status.Phase == v1alpha1.PhaseReady {
		t.Errorf("phase %s with the Service taken by someone else", got.Status.Phase)
	}

	untouched := func(when string) {
		t.Helper()
		var now corev1.Service
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), &now); err != nil {
			t.Fatalf("%s: the user's Service: %v", when, err)
		}
		if now.ResourceVersion != before.ResourceVersion || !equality.Semantic.DeepEqual(now.Spec, before.Spec) ||
			!equality.Semantic.DeepEqual(now.Labels, before.Labels) || len(now.OwnerReferences) != 0 {
			t.Errorf("%s: the user's Service changed:\nwas %s %v %v %+v\nnow %s %v %v %+v", when,
				before.ResourceVersion, before.Labels, before.OwnerReferences, before.Spec,
				now.ResourceVersion, now.Labels, now.OwnerReferences, now.Spec)
		}
	}
	untouched("while the Proxy lives")
	var slice discoveryv1.EndpointSlice
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), &slice); !apierrors.IsNotFound(err) {
		t.Errorf("an EndpointSlice %s feeds the user's Service (err %v): %+v", svc.Name, err, slice)
	}

	// deleteProxy also collects what the Proxy owns, as Kubernetes'
	// garbage collector would: the user's Service must not be among it.
	deleteProxy(t, p)
	untouched("after the Proxy is deleted")
}

// An EndpointSlice someone made under the Proxy's name is left exactly as
// it was, and the Proxy names it; the operator makes no Service either,
// since that Service would take the user's endpoints.
func TestUserEndpointSliceIsNeverTakenOver(t *testing.T) {
	ctx := context.Background()
	slice := userSlice(testNamespace, "theirs", "their-service")
	create(t, slice)
	before := slice.DeepCopy()

	p := newProxy(t, "theirs", nil)
	bootGuest(t, p, current)
	waitConflict(t, p, "EndpointSlice default/theirs", "not created by this operator")

	var now discoveryv1.EndpointSlice
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(slice), &now); err != nil {
		t.Fatal(err)
	}
	if now.ResourceVersion != before.ResourceVersion || !equality.Semantic.DeepEqual(now.Endpoints, before.Endpoints) ||
		!equality.Semantic.DeepEqual(now.Labels, before.Labels) || ownedBy(&now, get(t, p)) {
		t.Errorf("the user's EndpointSlice changed:\nwas %s %v %+v\nnow %s %v %v %+v",
			before.ResourceVersion, before.Labels, before.Endpoints, now.ResourceVersion, now.Labels, now.OwnerReferences, now.Endpoints)
	}
	var svc corev1.Service
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(slice), &svc); !apierrors.IsNotFound(err) {
		t.Errorf("a Service %s was made over the user's EndpointSlice (err %v)", slice.Name, err)
	}
}

// A Service and EndpointSlice of the previous release — the Proxy's
// controller reference, no v1alpha1.LabelProxy — are the Proxy's own: the operator
// labels and updates them in place, neither reporting a conflict nor
// making them again.
func TestPreviousReleasesObjectsAreAdopted(t *testing.T) {
	ctx := context.Background()
	p := newProxy(t, "upgraded", nil)
	// The previous release made these once the VM served; make them while
	// the VM still boots, so the operator meets them on its first serve.
	eventually(t, "the instance is created", func() bool {
		ref := get(t, p).Status.Instance
		return ref != nil && ref.ProviderID != ""
	})
	p = get(t, p)
	owner := []metav1.OwnerReference{{
		APIVersion: v1alpha1.GroupVersion.String(), Kind: "Proxy", Name: p.Name, UID: p.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, OwnerReferences: owner},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{
			Name: "proxy", Protocol: corev1.ProtocolTCP, Port: 3128, TargetPort: intstr.FromInt32(3128),
		}}},
	}
	create(t, svc)
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, OwnerReferences: owner, Labels: map[string]string{
			discoveryv1.LabelServiceName: p.Name, discoveryv1.LabelManagedBy: endpoints.ManagedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"192.0.2.250"}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("proxy"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](3128)}},
	}
	create(t, slice)

	ip := bootGuest(t, p, current)
	waitReady(t, p)
	var gotSvc corev1.Service
	eventually(t, "the Service is labelled", func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(svc), &gotSvc) == nil && gotSvc.Labels[v1alpha1.LabelProxy] == p.Name
	})
	if gotSvc.UID != svc.UID {
		t.Errorf("the Service was made again (uid %s, was %s)", gotSvc.UID, svc.UID)
	}
	var gotSlice discoveryv1.EndpointSlice
	eventually(t, "the EndpointSlice is labelled and points at the VM", func() bool {
		return k8s.Get(ctx, client.ObjectKeyFromObject(slice), &gotSlice) == nil && gotSlice.Labels[v1alpha1.LabelProxy] == p.Name &&
			len(gotSlice.Endpoints) == 1 && gotSlice.Endpoints[0].Addresses[0] == ip
	})
	if gotSlice.UID != slice.UID {
		t.Errorf("the EndpointSlice was made again (uid %s, was %s)", gotSlice.UID, slice.UID)
	}
	var slices discoveryv1.EndpointSliceList
	if err := k8s.List(ctx, &slices, client.InNamespace(p.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: p.Name}); err != nil {
		t.Fatal(err)
	}
	if len(slices.Items) != 1 {
		t.Errorf("%d EndpointSlices for the Service, want 1", len(slices.Items))
	}
	if slices := eventsFor(t, p); slicesContainPrefix(slices, v1alpha1.ReasonServiceConflict) {
		t.Errorf("a conflict was reported over the Proxy's own objects: %v", slices)
	}
}

func slicesContainPrefix(list []string, prefix string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// The manager's cache holds the Services and EndpointSlices the operator
// made, and none of anyone else's, in any namespace.
func TestCacheHoldsOnlyTheOperatorsObjects(t *testing.T) {
	ctx := context.Background()
	// Kept: envtest runs no namespace controller, so a deleted namespace
	// would stay Terminating.
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	create(t, userService("elsewhere", "web"))
	create(t, userSlice("elsewhere", "web-abcde", "web"))
	create(t, userService(testNamespace, "web"))

	p := newProxy(t, "cached", nil)
	bootGuest(t, p, current)
	waitReady(t, p)
	// One watch per kind delivers in resourceVersion order: once the
	// Proxy's objects, made last, are in the cache, anything else the
	// cache would hold is there too.
	var services corev1.ServiceList
	var endpointSlices discoveryv1.EndpointSliceList
	eventually(t, "the Proxy's Service and EndpointSlice are in the cache", func() bool {
		if mgrCache.List(ctx, &services) != nil || mgrCache.List(ctx, &endpointSlices) != nil {
			return false
		}
		return slices.Contains(serviceNames(services), "default/cached") && slices.Contains(sliceNames(endpointSlices), "default/cached")
	})
	for _, s := range services.Items {
		if s.Labels[v1alpha1.LabelProxy] == "" {
			t.Errorf("the cache holds Service %s/%s, which the operator did not make", s.Namespace, s.Name)
		}
	}
	for _, s := range endpointSlices.Items {
		if s.Labels[v1alpha1.LabelProxy] == "" {
			t.Errorf("the cache holds EndpointSlice %s/%s, which the operator did not make", s.Namespace, s.Name)
		}
	}
}

func serviceNames(l corev1.ServiceList) []string {
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

func sliceNames(l discoveryv1.EndpointSliceList) []string {
	var out []string
	for _, s := range l.Items {
		out = append(out, s.Namespace+"/"+s.Name)
	}
	return out
}

// A conflict is announced when it is new — the first time, or when the
// Proxy was not Ready for another reason or another conflict — and not at
// each resync that finds it again.
func TestConflictEventOnlyWhenNew(t *testing.T) {
	rec := events.NewFakeRecorder(10)
	r := &Reconciler{Recorder: rec}
	p := &v1alpha1.Proxy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "conflicted"}}
	serviceTaken := errors.New("Service default/conflicted exists and was not created by this operator for this Proxy (it has no owner)")
	sliceTaken := errors.New("EndpointSlice default/conflicted exists and was not created by this operator for this Proxy (it has no owner)")
	for _, step := range []struct {
		name      string
		before    func()
		conflict  error
		wantEvent bool
	}{
		{"the first look", nil, serviceTaken, true},
		{"the next resync", nil, serviceTaken, false},
		{"another object taken", nil, sliceTaken, true},
		{"the same, not Ready for another reason meanwhile", func() {
			replica.SetNotReady(p, v1alpha1.ReasonProxyUnreachable, sliceTaken.Error())
		}, sliceTaken, true},
	} {
		if step.before != nil {
			step.before()
		}
		// Outside a reconcile the status is not written; the event is recorded before.
		_, _ = r.reportConflict(context.Background(), p, step.conflict)
		if got := len(rec.Events) == 1; got != step.wantEvent {
			t.Errorf("%s: an event = %v, want %v", step.name, got, step.wantEvent)
		}
		for len(rec.Events) > 0 {
			<-rec.Events
		}
	}
}

// The same Service in the way of a Proxy of replicas, before any of them
// answers: the replicas' reconcile writes the Service after stepping
// them, and reports its conflict as the single-replica path does, rather
// than retrying it as an error with nothing on the Proxy to say why.
func TestUserServiceInTheWayOfReplicasIsReported(t *testing.T) {
	create(t, userService(testNamespace, "yours-replicas"))
	newPool(t, "yours-replicas", "198.51.100.252-198.51.100.253")
	p := newProxy(t, "yours-replicas", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "yours-replicas" })
	waitConflict(t, p, "Service default/yours-replicas", "not created by this operator")
}

// A Service the API server refuses for a reason other than ownership (the
// namespace's quota, here) is unavailable, not a conflict: the event gives
// the API server's reason, no replica is said to conflict, and both serve
// once the quota lets the Service in.
func TestServiceRefusedByAQuotaIsUnavailableNotAConflict(t *testing.T) {
	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "no-services", Namespace: testNamespace},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}
	create(t, quota)
	// What the quota controller, which envtest does not run, would write.
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}
	if err := k8s.Status().Update(ctx, quota); err != nil {
		t.Fatalf("quota status: %v", err)
	}
	newPool(t, "quota", "198.51.100.172-198.51.100.173")
	p := newProxy(t, "quota", func(p *v1alpha1.Proxy) { p.Spec.Replicas, p.Spec.AddressPool = 2, "quota" })
	playGuests(t, p)
	eventually(t, "the quota's refusal is an event", func() bool {
		return slices.ContainsFunc(eventsFor(t, p), func(e string) bool {
			return strings.HasPrefix(e, v1alpha1.ReasonServiceUnavailable+": ") && strings.Contains(e, "exceeded quota")
		})
	})
	for _, e := range eventsFor(t, p) {
		if strings.HasPrefix(e, v1alpha1.ReasonServiceConflict) {
			t.Errorf("a refused Service reported as a conflict: %s", e)
		}
	}
	if c := readyCondition(get(t, p)); c.Reason == v1alpha1.ReasonServiceConflict {
		t.Errorf("Ready is %s: %s, want no conflict", c.Reason, c.Message)
	}
	if err := k8s.Delete(ctx, quota); err != nil {
		t.Fatal(err)
	}
	readyN(t, p, 2)
}
