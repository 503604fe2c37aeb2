package replica

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// SpecHash identifies what the user asked a VM to be made from: the spec
// fields that reach the provider or the guest, the content of a cloud-init
// Secret the user supplies, and the roll annotation. A change to any
// replaces the VM. The default cloud-init the operator renders is not in
// it: a new release's template, or an edited defaultAllowedClients, never
// replaces a serving VM unasked (the CloudInitCurrent condition says so,
// and the roll annotation replaces it when the user chooses).
func SpecHash(proxy *v1alpha1.Proxy, userCloudInit []byte) string {
	spec := &proxy.Spec
	clients := make([]string, 0, len(spec.AllowedClients))
	for _, c := range spec.AllowedClients {
		clients = append(clients, string(c))
	}
	// A set: the order the user listed the networks in changes nothing.
	slices.Sort(clients)
	fields, _ := json.Marshal(struct {
		Provider       string
		Placement      v1alpha1.Placement
		Port           int32
		AllowedClients []string
		UserCloudInit  bool
		Roll           string
		// Omitted when unset, so a Proxy without a pool keeps the hash
		// it had before pools existed, and its VM.
		AddressPool string          `json:",omitempty"`
		Addresses   []v1alpha1.IPv4 `json:",omitempty"`
		// Omitted when unset, so a Proxy without egress keeps its hash.
		Egress *v1alpha1.Egress `json:",omitempty"`
	}{spec.Provider, spec.Placement, spec.Port, clients, userCloudInit != nil, proxy.Annotations[v1alpha1.RollAnnotation], spec.AddressPool, spec.Addresses, spec.Egress})
	h := sha256.New()
	h.Write(fields)
	h.Write([]byte{0})
	h.Write(userCloudInit)
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// CloudInitHash identifies the exact cloud-init bytes a VM was made with.
func CloudInitHash(cloudInit []byte) string {
	sum := sha256.Sum256(cloudInit)
	return hex.EncodeToString(sum[:])[:16]
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

// Describe names replica k in an event's note, for a Proxy of more than
// one replica.
func Describe(proxy *v1alpha1.Proxy, k int) string {
	if !Multi(proxy) {
		return ""
	}
	return fmt.Sprintf(" (replica %d)", k)
}
