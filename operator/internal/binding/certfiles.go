package binding

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// certFiles copies the webhook's certificate and key from its Secret into
// Dir, where the rotator waits for them and the webhook server (its
// certwatcher) reloads them. A Secret volume would do the same, but the
// kubelet refreshes one only on its next sync of the Pod: on a fresh
// install, where the rotator writes the Secret after the Pod started,
// the replica waited two minutes to be Ready (measured in make e2e).
type certFiles struct {
	Reader client.Reader
	Secret types.NamespacedName
	Dir    string
	// Waiting is the poll before the files are first written, Written the
	// poll after (a renewal is written months before the old certificate
	// expires).
	Waiting, Written time.Duration
}

// Key names in the Secret, as cert-controller writes them.
var certKeys = []string{corev1.TLSPrivateKeyKey, corev1.TLSCertKey}

func (c *certFiles) Start(ctx context.Context) error {
	poll := c.Waiting
	for {
		written, err := c.sync(ctx)
		if err != nil {
			logf.FromContext(ctx).Error(err, "copying the webhook's certificate", "secret", c.Secret.String(), "dir", c.Dir)
		}
		if written {
			poll = c.Written
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// NeedLeaderElection: every replica serves the webhook.
func (c *certFiles) NeedLeaderElection() bool { return false }

// sync writes each key of the Secret that differs from its file, the
// private key first (the rotator waits for the certificate, the server
// then reads both), each by a rename, so a reader never sees half a file.
// It reports whether the files hold a certificate.
func (c *certFiles) sync(ctx context.Context) (bool, error) {
	var s corev1.Secret
	if err := c.Reader.Get(ctx, c.Secret, &s); err != nil {
		return false, err
	}
	for _, key := range certKeys {
		if len(s.Data[key]) == 0 {
			return false, nil // not written by the rotator yet
		}
	}
	for _, key := range certKeys {
		path := filepath.Join(c.Dir, key)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, s.Data[key]) {
			continue
		}
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, s.Data[key], 0o600); err != nil {
			return false, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return false, fmt.Errorf("replacing %s: %w", path, err)
		}
	}
	return true, nil
}
