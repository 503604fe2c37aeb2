package addresses

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/replica"
)

// Releases: a ProxyAddress is deleted only once no VM holds its address.

// releaseUnused deletes the Proxy's ProxyAddresses not named in keep whose
// address no instance in its status, of any replica, was made with: the
// address of a pool the Proxy left, or of a replica scaled away, is
// released once its VM is gone (a replacement deletes the old VM before
// the new one is made, and clears it from the status only then; a removed
// replica's entry is dropped only once its VMs are gone).
func (al *Allocator) releaseUnused(ctx context.Context, proxy *v1alpha1.Proxy, held []v1alpha1.ProxyAddress, keep map[string]bool) error {
	inUse := map[string]bool{}
	for _, ref := range replica.All(proxy) {
		if ref != nil && ref.Address != "" {
			inUse[ref.Address] = true
		}
	}
	var errs []error
	for i := range held {
		h := &held[i]
		if keep[h.Name] || inUse[h.Spec.Address] {
			continue
		}
		if err := al.release(ctx, proxy, h); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ReleaseAll deletes every ProxyAddress of the Proxy: its VMs are gone.
func (al *Allocator) ReleaseAll(ctx context.Context, proxy *v1alpha1.Proxy) error {
	held, err := al.heldAddresses(ctx, proxy)
	if err != nil {
		return err
	}
	var errs []error
	for i := range held {
		if err := al.release(ctx, proxy, &held[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// release deletes one ProxyAddress, exactly the one read (its UID), so a
// new allocation of the same address is never deleted by mistake.
func (al *Allocator) release(ctx context.Context, proxy *v1alpha1.Proxy, pa *v1alpha1.ProxyAddress) error {
	uid := pa.UID
	err := al.Client.Delete(ctx, pa, client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing ProxyAddress %s: %w", pa.Name, err)
	}
	if err == nil {
		logf.FromContext(ctx).Info("released address", "pool", pa.Spec.Pool, "address", pa.Spec.Address)
		al.event(proxy, corev1.EventTypeNormal, "AddressReleased", "Release", fmt.Sprintf("released %s of AddressPool %s", pa.Spec.Address, pa.Spec.Pool))
	}
	return nil
}
