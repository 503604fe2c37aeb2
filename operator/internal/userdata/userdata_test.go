package userdata

import (
	"context"
	"errors"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

func proxyWith(ref *corev1.SecretKeySelector, clients ...v1alpha1.CIDR) *v1alpha1.Proxy {
	return &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: "egress", Namespace: "team-a"},
		Spec:       v1alpha1.ProxySpec{Port: 3128, CloudInit: ref, AllowedClients: clients},
	}
}

// The user's Secret is read as it is; each way it cannot be read names the
// field and the Secret, and only a refusal or a failure of the API server
// is a *ReadError; without a Secret the default proxy is rendered, never
// open to the world.
func TestRead(t *testing.T) {
	secrets := fake.NewClientBuilder().WithObjects(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "ci", Namespace: "team-a"},
		Data:       map[string][]byte{"user-data": []byte("#cloud-config\nhostname: mine\n")},
	}).WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if key.Name == "secret-of-another-team" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, errors.New("no RoleBinding"))
		}
		return c.Get(ctx, key, obj, opts...)
	}}).Build()
	u := &Reader{Secrets: secrets, DefaultAllowedClients: []string{"10.0.0.0/8"}}
	ctx := context.Background()

	data, user, err := u.Read(ctx, proxyWith(&corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ci"}, Key: "user-data"}))
	if err != nil || !user || string(data) != "#cloud-config\nhostname: mine\n" {
		t.Errorf("the user's Secret: %q, user %v, %v", data, user, err)
	}
	for _, tc := range []struct {
		ref     corev1.SecretKeySelector
		says    string
		readErr bool
		refusal bool
	}{
		{corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "user-data"}, `spec.cloudInit: Secret "absent" not found`, false, false},
		{corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "ci"}, Key: "other"}, `spec.cloudInit: Secret "ci" has no key "other"`, false, false},
		{corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "secret-of-another-team"}, Key: "user-data"}, `spec.cloudInit: reading Secret "secret-of-another-team"`, true, true},
	} {
		_, user, err := u.Read(ctx, proxyWith(&tc.ref))
		var read *ReadError
		if err == nil || !user || !strings.Contains(err.Error(), tc.says) || errors.As(err, &read) != tc.readErr {
			t.Errorf("Secret %s key %s: user %v, %v; want %q, a *ReadError: %v", tc.ref.Name, tc.ref.Key, user, err, tc.says, tc.readErr)
			continue
		}
		if tc.readErr && (read.Secret != tc.ref.Name || apierrors.IsForbidden(read.Err) != tc.refusal) {
			t.Errorf("Secret %s: ReadError %+v", tc.ref.Name, read)
		}
	}

	data, user, err = u.Read(ctx, proxyWith(nil))
	if err != nil || user || !strings.Contains(string(data), "10.0.0.0/8") {
		t.Errorf("the default, with the operator's clients: user %v, %v:\n%s", user, err, data)
	}
	data, _, err = u.Read(ctx, proxyWith(nil, "192.168.0.0/16"))
	if err != nil || !strings.Contains(string(data), "192.168.0.0/16") || strings.Contains(string(data), "10.0.0.0/8") {
		t.Errorf("the default, with the Proxy's clients: %v:\n%s", err, data)
	}
	if _, _, err := (&Reader{Secrets: secrets}).Read(ctx, proxyWith(nil)); err == nil || !strings.Contains(err.Error(), "never open to the world") {
		t.Errorf("no clients at all: %v, want a refusal", err)
	}
}

// The message of a refused read is the command that grants it, naming
// the operator as the API server knows it, or saying what to fill in.
func TestForbiddenMessage(t *testing.T) {
	asks := 0
	reviews := fake.NewClientBuilder().WithInterceptorFuncs(interceptor.Funcs{Create: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.CreateOption) error {
		asks++
		obj.(*authenticationv1.SelfSubjectReview).Status.UserInfo.Username = "system:serviceaccount:egress-system:egress-proxies-controller-manager"
		return nil
	}}).Build()
	u := &Reader{Reviews: reviews}
	p := proxyWith(nil)
	want := "kubectl -n team-a create rolebinding " + ReaderRole + " --clusterrole=" + ReaderRole + " --serviceaccount=egress-system:egress-proxies-controller-manager"
	for range 2 {
		if got := u.ForbiddenMessage(context.Background(), p, "ci"); !strings.Contains(got, want) || !strings.Contains(got, `Secret "ci" in namespace "team-a"`) {
			t.Errorf("message %q, want it to hold %q", got, want)
		}
	}
	if asks != 1 {
		t.Errorf("the API server was asked %d times who the operator is, want once", asks)
	}
	if got := (&Reader{}).ForbiddenMessage(context.Background(), p, "ci"); !strings.Contains(got, "--serviceaccount=<the operator's namespace>:<its ServiceAccount>") {
		t.Errorf("without an answer: %q", got)
	}
}

// spec.egress reaches the default cloud-init with the Proxy named on the
// refusal page; unset, the default is what it was without it.
func TestDefaultRendersEgress(t *testing.T) {
	p := proxyWith(nil, "10.0.0.0/8")
	without, err := Default(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(without), "Filter") {
		t.Errorf("a Proxy without egress has a filter:\n%s", without)
	}
	p.Spec.Egress = &v1alpha1.Egress{Destinations: []v1alpha1.Destination{{Host: "*.partner.example", Ports: []int32{8443}}, {Network: "203.0.113.0/24"}}}
	with, err := Default(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`^http://[^/:@]+\.partner\.example:8443(/|$)`, `^203\.0\.113\.`, "FilterDefaultDeny Yes",
		"Refused by the egress policy of Proxy team-a/egress"} {
		if !strings.Contains(string(with), want) {
			t.Errorf("the default cloud-init lacks %q:\n%s", want, with)
		}
	}
}
