package memprovider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/go-logr/logr"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// Egress addresses (Config.Egress, contract.EgressKeeper): each replica
// of a Proxy gets one Cloud address, allocated with the marks LabelManaged,
// LabelUID and LabelReplica in the same call (so a Create cut after the
// allocation finds it again by its marks), attached to the replica's
// newest instance, and kept when that instance is deleted: only
// ReleaseEgress releases it.

// KeepsEgress reports whether the config gives replicas egress addresses.
func (p *Provider) KeepsEgress() bool { return p.cfg.Egress }

// attachEgress finds or allocates req's replica's address and attaches it
// to req's VM (step 4 of Create), returning its IP.
func (p *Provider) attachEgress(ctx context.Context, req contract.CreateRequest) (string, error) {
	region := req.Placement.Region
	kept, err := p.addressesOf(ctx, region, req.UID, req.Replica)
	if err != nil {
		return "", err
	}
	if len(kept) == 0 {
		var a Address
		err = p.do(ctx, "AllocateAddress", func(ctx context.Context) (err error) {
			a, err = p.cloud.AllocateAddress(ctx, p.cfg.Token, region, map[string]string{
				contract.LabelManaged: req.Owner, contract.LabelUID: req.UID, contract.LabelReplica: strconv.Itoa(int(req.Replica)),
			})
			return err
		})
		if err != nil {
			return "", err
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("allocated egress address", "address", a.IP, "replica", req.Replica)
		// Racing Creates of the replica may each have allocated one: read
		// them again, so that every racer settles on the same.
		if kept, err = p.addressesOf(ctx, region, req.UID, req.Replica); err != nil {
			return "", err
		}
	}
	// The oldest address (the Cloud lists them so) is the replica's: any
	// racer that sees a younger one sees it too. The others are racers'
	// extras, released by their own Create or by this one.
	a := kept[0]
	for _, extra := range kept[1:] {
		err := p.do(ctx, "ReleaseAddress", func(ctx context.Context) error {
			return p.cloud.ReleaseAddress(ctx, p.cfg.Token, region, extra.IP)
		})
		if err != nil && !errors.Is(err, contract.ErrNotFound) {
			return "", err
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogStep).Info("released a racer's extra egress address", "address", extra.IP, "replica", req.Replica)
	}
	if a.VM != req.Name {
		if err := p.do(ctx, "AttachAddress", func(ctx context.Context) error {
			return p.cloud.AttachAddress(ctx, p.cfg.Token, region, a.IP, req.Name)
		}); err != nil {
			return "", err
		}
	}
	return a.IP, nil
}

// addressesOf lists the addresses kept for uid's replica in region.
func (p *Provider) addressesOf(ctx context.Context, region, uid string, replica int32) ([]Address, error) {
	var all []Address
	err := p.do(ctx, "ListAddresses", func(ctx context.Context) (err error) {
		all, err = p.cloud.ListAddresses(ctx, p.cfg.Token, region, contract.LabelUID, uid)
		return err
	})
	return slices.DeleteFunc(all, func(a Address) bool { return a.Labels[contract.LabelReplica] != strconv.Itoa(int(replica)) }), err
}

// ListEgress lists every region's addresses marked with owner; one
// unreadable region fails the whole list.
func (p *Provider) ListEgress(ctx context.Context, owner string) ([]contract.Egress, error) {
	var out []contract.Egress
	for _, region := range p.cfg.Regions {
		var found []Address
		err := p.do(ctx, "ListAddresses", func(ctx context.Context) (err error) {
			found, err = p.cloud.ListAddresses(ctx, p.cfg.Token, region, contract.LabelManaged, owner)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list egress addresses of region %q: %w", region, err)
		}
		for _, a := range found {
			replica, err := strconv.Atoi(a.Labels[contract.LabelReplica])
			if err != nil {
				continue // not one this provider made
			}
			out = append(out, contract.Egress{Region: region, UID: a.Labels[contract.LabelUID], Replica: int32(replica), Owner: owner, IP: a.IP})
		}
	}
	return out, nil
}

// ReleaseEgress releases the addresses kept for e's replica; none is nil.
func (p *Provider) ReleaseEgress(ctx context.Context, e contract.Egress) error {
	if !slices.Contains(p.cfg.Regions, e.Region) {
		logr.FromContextOrDiscard(ctx).Info("region is no longer configured; no egress address to release", "region", e.Region)
		return nil
	}
	if err := e.Validate(); err != nil {
		return err
	}
	kept, err := p.addressesOf(ctx, e.Region, e.UID, e.Replica)
	if err != nil {
		return err
	}
	for _, a := range kept {
		err := p.do(ctx, "ReleaseAddress", func(ctx context.Context) error {
			return p.cloud.ReleaseAddress(ctx, p.cfg.Token, e.Region, a.IP)
		})
		if err != nil && !errors.Is(err, contract.ErrNotFound) {
			return err
		}
		logr.FromContextOrDiscard(ctx).V(contract.LogOutcome).Info("released egress address", "address", a.IP, "replica", e.Replica)
	}
	return nil
}
