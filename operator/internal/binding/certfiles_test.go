package binding

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controllertest"
)

func TestCertFilesFollowTheSecret(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "webhook-cert", Namespace: "default"}}
	if err := k8s.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), secret) })
	dir := t.TempDir()
	c := &certFiles{Reader: k8s, Secret: types.NamespacedName{Namespace: "default", Name: "webhook-cert"}, Dir: dir,
		Waiting: 10 * time.Millisecond, Written: 10 * time.Millisecond}
	done := make(chan error)
	go func() { done <- c.Start(ctx) }()
	read := func(key string) string {
		b, _ := os.ReadFile(filepath.Join(dir, key))
		return string(b)
	}

	// Shipped empty: nothing is written until the rotator fills it.
	time.Sleep(100 * time.Millisecond)
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files written from an empty Secret: %v", entries)
	}
	for _, round := range []string{"first", "renewed"} {
		secret.Data = map[string][]byte{corev1.TLSCertKey: []byte(round + " cert"), corev1.TLSPrivateKeyKey: []byte(round + " key"), "ca.crt": []byte("ca")}
		if err := k8s.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		controllertest.Eventually(t, "the "+round+" certificate is in the directory", func() bool {
			return read(corev1.TLSCertKey) == round+" cert" && read(corev1.TLSPrivateKeyKey) == round+" key"
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "ca.crt")); err == nil {
		t.Error("the CA's file was written; the server needs only its certificate and key")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}
