// Package identity names what an operator install owns on a backend: the
// install ID (configured, or derived from the cluster) and the Owner of
// each provider entry, "<installID>-<entry>", which the operator writes as
// the value of the managed mark (contract.LabelManaged) on every instance
// it creates. Installs and entries sharing one backend then list, collect
// and adopt only their own instances (docs/architecture.md, Principles).
package identity

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// MaxInstallIDLen bounds a configured install ID, leaving most of a
	// mark's 63 characters to the entry name.
	MaxInstallIDLen = 16
	// DefaultInstallIDLen is the length of the derived install ID.
	DefaultInstallIDLen = 8
	// MaxOwnerLen is the longest Owner: a DNS-1123 label, the charset every
	// provider's marks hold (contract.CreateRequest.Owner).
	MaxOwnerLen = 63
	// ClusterNamespace is the namespace whose UID names the cluster: every
	// cluster has it, it is never deleted, and its UID outlives restarts
	// and upgrades of the operator.
	ClusterNamespace = "kube-system"
)

// installIDRE allows no '-': the first '-' of an Owner then ends the
// install ID, and the rest is the entry name.
var installIDRE = regexp.MustCompile(`^[a-z0-9]{1,16}$`)

// +kubebuilder:rbac:groups="",resources=namespaces,resourceNames=kube-system,verbs=get

// ValidateInstallID says what is wrong with a configured install ID.
func ValidateInstallID(id string) error {
	if !installIDRE.MatchString(id) {
		return fmt.Errorf("installID %q: lowercase letters and digits only, 1 to %d characters (no '-', so \"<installID>-<entry>\" parses unambiguously)", id, MaxInstallIDLen)
	}
	return nil
}

// Owner is the managed mark's value for the instances entry makes.
func Owner(installID, entry string) string { return installID + "-" + entry }

// Default derives the install ID from the cluster: the first 8 hex digits
// of the kube-system Namespace's UID. The UID is the cluster's for its
// whole life, so the ID survives every restart and upgrade, and two
// clusters sharing a backend get different IDs. It is read once, at start.
func Default(ctx context.Context, r client.Reader) (string, error) {
	var ns corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: ClusterNamespace}, &ns); err != nil {
		return "", fmt.Errorf("deriving the install ID from the %s Namespace's UID (set installID in the providers config to skip this): %w", ClusterNamespace, err)
	}
	hex := strings.ReplaceAll(string(ns.UID), "-", "")
	if len(hex) < DefaultInstallIDLen {
		return "", fmt.Errorf("deriving the install ID: the %s Namespace's UID %q is too short; set installID in the providers config", ClusterNamespace, ns.UID)
	}
	id := strings.ToLower(hex[:DefaultInstallIDLen])
	if err := ValidateInstallID(id); err != nil {
		return "", fmt.Errorf("deriving the install ID from the %s Namespace's UID %q: %w; set installID in the providers config", ClusterNamespace, ns.UID, err)
	}
	return id, nil
}

// Resolve returns the configured install ID, or the derived one when none
// is configured.
func Resolve(ctx context.Context, r client.Reader, configured string) (string, error) {
	if configured != "" {
		return configured, ValidateInstallID(configured)
	}
	return Default(ctx, r)
}
