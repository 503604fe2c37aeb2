package binding

import "testing"

func TestOptionsNameEveryMissingFlag(t *testing.T) {
	err := Options{Port: 9443, CertDir: "/certs", Domain: "cluster.local"}.validate()
	want := "the Pod webhook (--webhook-port 9443) needs --webhook-namespace (or POD_NAMESPACE), --webhook-secret, --webhook-service, --webhook-configuration"
	if err == nil || err.Error() != want {
		t.Fatalf("validate = %v, want %q", err, want)
	}
	full := Options{Port: 9443, CertDir: "/certs", Namespace: "ops", SecretName: "s", ServiceName: "svc", ConfigurationName: "c", Domain: "cluster.local"}
	if err := full.validate(); err != nil {
		t.Fatalf("validate of a full set: %v", err)
	}
}
