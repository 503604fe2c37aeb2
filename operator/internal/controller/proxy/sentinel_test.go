package proxy

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// A CloudInit sentinel and the provider's credential must appear in no log
// line, event, status or span the operator produces, on the success paths
// and the failure paths (a transient fault, a rejected credential).
func TestSentinelsAppearNowhere(t *testing.T) {
	ctx := context.Background()
	cloudInitSentinel := "sentinel-cloudinit-9b2d41"
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sentinel-user-data", Namespace: testNamespace},
		Data:       map[string][]byte{"user-data": []byte("#cloud-config\n# " + cloudInitSentinel + "\n")},
	}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(ctx, secret) })
	if err := control.FailNext(contracttest.OpCreate, nil); err != nil {
		t.Fatal(err)
	}
	p := newProxy(t, "sentinel", func(p *v1alpha1.Proxy) {
		p.Spec.CloudInit = &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: secret.Name}, Key: "user-data"}
	})
	bootGuest(t, p, current)
	waitReady(t, p)

	control.RejectCredentials(true)
	eventually(t, "the rejected credential is reported", func() bool {
		e := get(t, p).Status.LastError
		return e != nil && strings.Contains(e.Message, "401")
	})
	control.RejectCredentials(false)
	status, _ := json.Marshal(get(t, p).Status)
	deleteProxy(t, p)

	var events eventsv1.EventList
	if err := k8s.List(ctx, &events, client.InNamespace(testNamespace)); err != nil {
		t.Fatal(err)
	}
	eventText, _ := json.Marshal(events.Items)
	var spanText strings.Builder
	for _, s := range spans.Ended() {
		fmt.Fprintf(&spanText, "%s %s %v %v\n", s.Name(), s.Status().Description, s.Attributes(), s.Events())
	}
	outputs := map[string]string{"logs": logs.String(), "events": string(eventText), "status": string(status), "spans": spanText.String()}
	for what, secretText := range map[string]string{"CloudInit": cloudInitSentinel, "credential": testToken} {
		for _, form := range append([]string{secretText}, base64Forms(secretText)...) {
			for where, text := range outputs {
				if i := strings.Index(text, form); i >= 0 {
					t.Errorf("the %s sentinel appears in the %s: …%s…", what, where, text[max(0, i-200):min(len(text), i+100)])
				}
			}
		}
	}
	if !strings.Contains(spanText.String(), "provider.Create") || !strings.Contains(spanText.String(), "memcloud.CreateVM") {
		t.Errorf("expected operation spans with child spans beneath; recorded:\n%.2000s", spanText.String())
	}
}

// base64Forms returns, for each of the three byte alignments s can have in
// a payload and for both base64 alphabets, the run of characters every
// encoding of such a payload contains whatever surrounds s: the quanta
// made of s's bytes alone. Encoding s by itself would only find s at the
// start of a payload.
func base64Forms(s string) []string {
	var forms []string
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
		for lead := range 3 {
			e := enc.EncodeToString(append(make([]byte, lead), s...))
			start, end := 0, len(e)
			if lead > 0 {
				start = 4 // the first quantum holds bytes before s
			}
			if (lead+len(s))%3 != 0 {
				end -= 4 // the last quantum holds bytes after s, or padding
			}
			forms = append(forms, e[start:end])
		}
	}
	slices.Sort(forms)
	return slices.Compact(forms)
}

// The sentinel check finds a sentinel base64-encoded inside a payload at
// every offset, as cloud-init in a VM's metadata would be.
func TestBase64FormsFindAnEmbeddedSentinel(t *testing.T) {
	const sentinel = "sentinel-cloudinit-9b2d41"
	forms := base64Forms(sentinel)
	for lead := range 6 {
		payload := strings.Repeat("#", lead) + "\n# " + sentinel + "\nruncmd: []\n"
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding} {
			encoded := enc.EncodeToString([]byte(payload))
			if !slices.ContainsFunc(forms, func(f string) bool { return strings.Contains(encoded, f) }) {
				t.Errorf("the sentinel %d bytes into the payload is not found in %s", lead+3, encoded)
			}
		}
	}
	if slices.ContainsFunc(forms, func(f string) bool { return len(f) < 24 }) {
		t.Errorf("forms %q: too short to be specific", forms)
	}
}
