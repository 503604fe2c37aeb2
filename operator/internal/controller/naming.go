package controller

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// specHash identifies what a VM is made from: the spec fields that reach
// the provider and the exact cloud-init bytes. A change to any replaces the
// VM; a change to nothing else (labels, annotations) does not.
func specHash(spec *v1alpha1.ProxySpec, cloudInit []byte) string {
	h := sha256.New()
	fields, _ := json.Marshal(struct {
		Provider  string
		Placement v1alpha1.Placement
		Port      int32
	}{spec.Provider, spec.Placement, spec.Port})
	h.Write(fields)
	h.Write([]byte{0})
	h.Write(cloudInit)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// instanceName is the VM's name: deterministic, so a repeat Create after a
// crash finds the same VM; distinct per Proxy (its UID) and per spec (its
// hash), so a replacement never collides with the VM it replaces. It is a
// DNS-1123 label that starts with the Proxy's name, for people reading the
// backend's inventory.
func instanceName(proxy *v1alpha1.Proxy, hash string) string {
	sum := sha256.Sum256([]byte(string(proxy.UID) + "/" + hash))
	suffix := hex.EncodeToString(sum[:])[:10]
	prefix := proxy.Name
	if len(prefix) > 63-len(suffix)-1 {
		prefix = strings.TrimRight(prefix[:63-len(suffix)-1], "-.")
	}
	prefix = strings.ReplaceAll(prefix, ".", "-")
	return prefix + "-" + suffix
}
