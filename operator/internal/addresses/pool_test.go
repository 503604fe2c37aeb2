package addresses

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

func TestParsePool(t *testing.T) {
	spec := v1alpha1.AddressPoolSpec{
		Addresses: []v1alpha1.PoolAddresses{"192.0.2.0/30", "192.0.2.9-192.0.2.11", "192.0.2.10", "192.0.2.255"},
		Prefix:    24, Gateway: "192.0.2.1",
	}
	pn, err := Parse(&spec)
	if err != nil {
		t.Fatal(err)
	}
	// .0 is the network's, .1 the gateway, .255 the broadcast; .10 once.
	if got, want := fmt.Sprint(pn.Addrs), "[192.0.2.2 192.0.2.3 192.0.2.9 192.0.2.10 192.0.2.11]"; got != want {
		t.Errorf("addresses %s, want %s", got, want)
	}
	for _, tc := range []struct {
		edit func(*v1alpha1.AddressPoolSpec)
		want string
	}{
		{func(s *v1alpha1.AddressPoolSpec) { s.Addresses = []v1alpha1.PoolAddresses{"192.0.2.20-192.0.2.10"} }, `spec.addresses[0]: "192.0.2.20-192.0.2.10" ends before it starts`},
		{func(s *v1alpha1.AddressPoolSpec) { s.Addresses = []v1alpha1.PoolAddresses{"198.51.100.5"} }, `spec.addresses[0]: "198.51.100.5" is not inside 192.0.2.0/24`},
		{func(s *v1alpha1.AddressPoolSpec) {
			s.Addresses = []v1alpha1.PoolAddresses{"10.0.0.0/8"}
			s.Prefix = 8
			s.Gateway = "10.0.0.1"
		}, "spec.addresses: more than 4096"},
		{func(s *v1alpha1.AddressPoolSpec) { s.Gateway = "nope" }, `spec.gateway: "nope"`},
		{func(s *v1alpha1.AddressPoolSpec) {
			s.AllowedNamespaces = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near", Values: []string{"a"}}}}
		}, `spec.allowedNamespaces: "Near" is not a valid label selector operator`},
	} {
		s := spec
		tc.edit(&s)
		if _, err := Parse(&s); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}
