//go:build e2e

package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// replaced is what waitReplaced saw of a replacement.
type replaced struct {
	proxy *v1alpha1.Proxy
	// oldGone and newDefined are when the domain listing first lacked the
	// old domain and first had the new one.
	oldGone, newDefined time.Time
}

// waitReplaced polls, every second, the Proxy and the daemon's domains
// until the Proxy is Ready on an instance other than old with no
// replacement pending. A static address is replaced break-before-make
// (docs/addresses.md): a listing holding both the old domain and a new
// one of the Proxy means two VMs carried the address at once.
func waitReplaced(t *testing.T, k8s client.Client, l lane, key client.ObjectKey, old string, limit time.Duration) replaced {
	t.Helper()
	var r replaced
	start := time.Now()
	last := ""
	within(t, limit, time.Second, "the Proxy "+key.String()+" is Ready on a new instance replacing "+old, func() (bool, string) {
		var p v1alpha1.Proxy
		if err := k8s.Get(t.Context(), key, &p); err != nil {
			t.Fatalf("get the Proxy: %v", err)
		}
		var next string
		switch s := p.Status; {
		case s.Replacement != nil:
			next = s.Replacement.Name
		case s.Instance != nil && s.Instance.Name != old:
			next = s.Instance.Name
		}
		ds := domains(t, l)
		hasOld, hasNew := slices.Contains(ds, old), next != "" && slices.Contains(ds, next)
		now := time.Now()
		if hasOld && hasNew {
			t.Errorf("the old domain %s and its replacement %s are both defined: %v", old, next, ds)
		}
		if !hasOld && r.oldGone.IsZero() {
			r.oldGone = now
			t.Logf("+%s the old domain %s is gone (domains %v)", since(start), old, ds)
		}
		if hasNew && r.newDefined.IsZero() {
			r.newDefined = now
			t.Logf("+%s the new domain %s is defined", since(start), next)
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		msg := ""
		if cond != nil {
			msg = cond.Reason + ": " + cond.Message
		}
		if s := fmt.Sprintf("%s %s %s", p.Status.Phase, p.Status.Address, msg); s != last {
			t.Logf("+%s %s", since(start), s)
			last = s
		}
		if p.Status.Phase == v1alpha1.PhaseFailed {
			t.Fatalf("the Proxy failed: %s (last error %+v)", msg, p.Status.LastError)
		}
		done := cond != nil && cond.Status == metav1.ConditionTrue && p.Status.Replacement == nil &&
			p.Status.Instance != nil && p.Status.Instance.Name != old && p.Status.ObservedGeneration == p.Generation
		r.proxy = &p
		return done, last
	})
	return r
}
