// Package health keeps one ProviderHealth per configured provider entry
// (docs/operator.md).
package health

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/metrics"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// A check round of one provider may take the entry's checkInterval: the
// provider bounds each of its calls itself (a region's several checks
// each have OpenStack's callTimeout, 30 s by default), so a round bounded
// tighter would cut the later targets of a slow but healthy backend as
// timed out, and a round longer than the interval would run into the next.
// An entry without one (a test's) gets defaultRoundTimeout.
const defaultRoundTimeout = 30 * time.Second

// Checker keeps one ProviderHealth per configured provider up to
// date: it runs the provider's Checker every checkInterval, and deletes the
// ProviderHealth of a provider no longer in the config.
type Checker struct {
	Client    client.Client
	Providers *providers.Set

	// rounds holds a *sync.Mutex per provider name: a round run on demand
	// (CheckAll) waits for a periodic one in flight, so the older results
	// never overwrite the newer.
	rounds sync.Map
}

// +kubebuilder:rbac:groups=egressproxies.io,resources=providerhealths,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=egressproxies.io,resources=providerhealths/status,verbs=get;update;patch

// Start prunes stale ProviderHealths, then checks each provider on its own
// interval until ctx ends.
func (h *Checker) Start(ctx context.Context) error {
	if err := h.Prune(ctx); err != nil {
		logf.FromContext(ctx).Error(err, "pruning ProviderHealths of removed providers")
	}
	h.Providers.Every(ctx, func(e *providers.Entry) time.Duration { return e.CheckInterval },
		func(ctx context.Context, e *providers.Entry) {
			if err := h.Check(ctx, e); err != nil && ctx.Err() == nil {
				logf.FromContext(ctx).Error(err, "writing ProviderHealth", contract.LogKeyProvider, e.Name)
			}
		})
	return nil
}

// NeedLeaderElection keeps checks to one replica.
func (h *Checker) NeedLeaderElection() bool { return true }

// Prune deletes the ProviderHealth of every provider not configured.
func (h *Checker) Prune(ctx context.Context) error {
	var list v1alpha1.ProviderHealthList
	if err := h.Client.List(ctx, &list); err != nil {
		return err
	}
	for i := range list.Items {
		if _, ok := h.Providers.Get(list.Items[i].Name); !ok {
			if err := h.Client.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// Check runs one check round of e and writes its ProviderHealth.
func (h *Checker) Check(ctx context.Context, e *providers.Entry) error {
	round, _ := h.rounds.LoadOrStore(e.Name, &sync.Mutex{})
	round.(*sync.Mutex).Lock()
	defer round.(*sync.Mutex).Unlock()
	results := []contract.CheckResult{{Target: "provider", Reason: contract.ReasonNotChecked, Message: "the provider does not implement health checks"}}
	if checker, ok := e.Provider.(contract.Checker); ok {
		timeout := e.CheckInterval
		if timeout <= 0 {
			timeout = defaultRoundTimeout
		}
		cctx, cancel := context.WithTimeout(logf.IntoContext(ctx, logf.FromContext(ctx).WithValues(contract.LogKeyProvider, e.Name)), timeout)
		results = checker.Check(cctx)
		cancel()
	}
	ph := &v1alpha1.ProviderHealth{ObjectMeta: metav1.ObjectMeta{Name: e.Name}}
	record := func() error { h.record(ph, e, results); return nil }
	res, err := controllerutil.CreateOrPatch(ctx, h.Client, ph, record)
	if err != nil || res != controllerutil.OperationResultCreated {
		return err
	}
	// The API server drops the status of an object created with one (it
	// is a subresource): the first round writes it now.
	before := ph.DeepCopy()
	h.record(ph, e, results)
	return h.Client.Status().Patch(ctx, ph, client.MergeFrom(before))
}

// record writes one round's results into ph's status: lastTransitionTime,
// of each check and of Ready, moves only when the outcome changes; and
// sets the check_ok series.
func (h *Checker) record(ph *v1alpha1.ProviderHealth, e *providers.Entry, results []contract.CheckResult) {
	now := metav1.Now()
	previous := map[string]v1alpha1.ProviderCheck{}
	for _, c := range ph.Status.Checks {
		previous[c.Target] = c
	}
	var failed []string
	checks := make([]v1alpha1.ProviderCheck, 0, len(results))
	for _, r := range results {
		c := v1alpha1.ProviderCheck{Target: r.Target, OK: r.OK, Reason: r.Reason, Message: r.Message, Details: r.Details, LastCheckTime: now, LastTransitionTime: now}
		if old, ok := previous[r.Target]; ok && old.OK == r.OK {
			c.LastTransitionTime = old.LastTransitionTime
		}
		checks = append(checks, c)
		ok := 0.0
		if r.OK {
			ok = 1
		} else {
			failed = append(failed, fmt.Sprintf("%s (%s)", r.Target, r.Reason))
		}
		metrics.CheckOK.DeletePartialMatch(map[string]string{"provider": e.Name, "target": r.Target})
		metrics.CheckOK.WithLabelValues(e.Name, r.Target, r.Reason).Set(ok)
	}
	ph.Status.Type = e.Type
	ph.Status.Owner = e.Owner
	ph.Status.Checks = checks
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonChecksPassed,
		Message: fmt.Sprintf("%d checks passed", len(checks)), ObservedGeneration: ph.Generation}
	if len(failed) > 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonChecksFailed
		cond.Message = "failing: " + strings.Join(failed, ", ")
	}
	meta.SetStatusCondition(&ph.Status.Conditions, cond)
}

// CheckAll runs one check round of every provider now, side by side, and
// waits for them.
func (h *Checker) CheckAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, e := range h.Providers.All() {
		wg.Go(func() {
			if err := h.Check(ctx, e); err != nil && ctx.Err() == nil {
				logf.FromContext(ctx).Error(err, "writing ProviderHealth", contract.LogKeyProvider, e.Name)
			}
		})
	}
	wg.Wait()
}
