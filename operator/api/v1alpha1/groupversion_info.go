// Package v1alpha1 holds the egressproxies.io/v1alpha1 API: Proxy,
// ProviderHealth, AddressPool and ProxyAddress.
// +kubebuilder:object:generate=true
// +groupName=egressproxies.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API's group and version.
	GroupVersion = schema.GroupVersion{Group: "egressproxies.io", Version: "v1alpha1"}
	// SchemeBuilder registers the API's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the API's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Proxy{}, &ProxyList{}, &ProviderHealth{}, &ProviderHealthList{},
		&AddressPool{}, &AddressPoolList{}, &ProxyAddress{}, &ProxyAddressList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
