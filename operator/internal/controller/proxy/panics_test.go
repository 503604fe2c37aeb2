package proxy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// A provider that panics in Create (an SDK dereferencing an answer it did
// not expect) leaves the operator running: the Create runs on an
// operation lane's goroutine, where the panic would end the process, and
// the next leader would make the same call and end too. The panic is the
// Create's transient error, on the Proxy's Provisioned condition, and the
// Proxy is made once the provider stops panicking.
func TestAPanickingProviderLeavesTheProxyWithACondition(t *testing.T) {
	createPanics.Store("panics", true)
	t.Cleanup(func() { createPanics.Delete("panics") })
	p := newProxy(t, "panics", nil)
	eventually(t, "the Proxy's condition names the panic", func() bool {
		c := meta.FindStatusCondition(get(t, p).Status.Conditions, v1alpha1.ConditionProvisioned)
		return c != nil && c.Status == metav1.ConditionFalse && strings.Contains(c.Message, "panicked in Create")
	})
	createPanics.Delete("panics")
	bootGuest(t, p, func(s *v1alpha1.ProxyStatus) *v1alpha1.InstanceRef { return s.Instance })
	waitReady(t, p)
}
