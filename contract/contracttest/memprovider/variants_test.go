package memprovider

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// variants lists the deliberately broken providers, each with the rule
// that must catch it; docs/provider-contract.md §11 maps every MUST to
// them.
var variants = []variant{
	{"egress-not-read-by-get", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, _ VM) (contract.Instance, error) {
			inst.EgressIP = "" // only Create reports it
			return inst, nil
		})
	}, nil},
	{"egress-shared-by-replicas", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			req.Replica = 0 // one address per Proxy
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"egress-new-per-instance", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			// A fresh address for every new instance: the old one let go.
			if _, err := b.getVM(ctx, req.Placement.Region, req.Name); errors.Is(err, contract.ErrNotFound) {
				_ = b.Provider.ReleaseEgress(ctx, contract.Egress{Region: req.Placement.Region, UID: req.UID, Replica: req.Replica})
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"egress-stays-on-the-oldest", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			// An address attached elsewhere is left there.
			kept, err := b.addressesOf(ctx, req.Placement.Region, req.UID, req.Replica)
			if err != nil || len(kept) == 0 || kept[0].VM == "" || kept[0].VM == req.Name {
				return b.Provider.Create(ctx, req)
			}
			plain := *b.Provider
			plain.cfg.Egress = false
			return plain.Create(ctx, req)
		}
	}, nil},
	{"delete-releases-egress", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			region, name, _ := strings.Cut(id, "/")
			if vm, err := b.getVM(ctx, region, name); err == nil {
				for replica := range int32(2) {
					_ = b.Provider.ReleaseEgress(ctx, contract.Egress{Region: region, UID: vm.Labels[contract.LabelUID], Replica: replica})
				}
			}
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"release-twice-fails", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.releaseEgress = func(ctx context.Context, e contract.Egress) error {
			kept, err := b.addressesOf(ctx, e.Region, e.UID, e.Replica)
			if err == nil && len(kept) == 0 {
				return fmt.Errorf("no egress address kept for %s replica %d: %w", e.UID, e.Replica, contract.ErrNotFound)
			}
			return b.Provider.ReleaseEgress(ctx, e)
		}
	}, nil},
	{"release-passes-over-failure", "EgressKeptPerReplica", func(b *brokenProvider) {
		// A failed release of the Cloud's address is logged, not returned.
		b.releaseEgress = func(ctx context.Context, e contract.Egress) error {
			kept, err := b.addressesOf(ctx, e.Region, e.UID, e.Replica)
			if err != nil {
				return err
			}
			for _, a := range kept {
				_ = b.do(ctx, "ReleaseAddress", func(ctx context.Context) error {
					return b.cloud.ReleaseAddress(ctx, b.cfg.Token, e.Region, a.IP)
				})
			}
			return nil
		}
	}, nil},
	{"egress-listed-without-replica", "EgressKeptPerReplica", func(b *brokenProvider) {
		b.listEgress = func(ctx context.Context, owner string) ([]contract.Egress, error) {
			kept, err := b.Provider.ListEgress(ctx, owner)
			for i := range kept {
				kept[i].Replica = 0 // the mark not read back
			}
			return kept, err
		}
	}, nil},
	{"egress-list-stops-at-stray", "EgressKeptPerReplica", func(b *brokenProvider) {
		// The listing ends at the first address without a replica mark.
		b.listEgress = func(ctx context.Context, owner string) ([]contract.Egress, error) {
			return b.listEgressWith(ctx, owner, true, false)
		}
	}, nil},
	{"egress-listed-in-every-region", "EgressKeptPerReplica", func(b *brokenProvider) {
		// Each address is listed under every region, as by a provider
		// whose list is not scoped to the region it asks (one region's
		// client for all, or a cloud-wide list): the GC's release under
		// the wrong region would miss the address.
		b.listEgress = func(ctx context.Context, owner string) ([]contract.Egress, error) {
			kept, err := b.Provider.ListEgress(ctx, owner)
			var out []contract.Egress
			for _, region := range b.cfg.Regions {
				for _, x := range kept {
					x.Region = region
					out = append(out, x)
				}
			}
			return out, err
		}
	}, nil},
	{"egress-lists-strays", "EgressKeptPerReplica", func(b *brokenProvider) {
		// An address without a replica mark is listed as replica 0.
		b.listEgress = func(ctx context.Context, owner string) ([]contract.Egress, error) {
			return b.listEgressWith(ctx, owner, false, true)
		}
	}, nil},
	{"create-not-idempotent", "RepeatCreate", func(b *brokenProvider) {
		var n atomic.Int64
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			req.Name = fmt.Sprintf("%s-%d", req.Name, n.Add(1))
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"get-remembers-deleted", "GetAfterDelete", func(b *brokenProvider) {
		var seen sync.Map
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err == nil {
				seen.Store(inst.ProviderID, inst)
			}
			return inst, err
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			if errors.Is(err, contract.ErrNotFound) {
				if old, ok := seen.Load(id); ok {
					return old.(contract.Instance), nil
				}
			}
			if err == nil && inst.State != contract.StateTerminated {
				seen.Store(id, inst)
			}
			return inst, err
		}
	}, nil},
	{"delete-not-idempotent", "DeleteTwice", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			if _, err := b.Provider.Get(ctx, id); err != nil {
				return err
			}
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"malformed-id-sent-to-backend", "MalformedID", func(b *brokenProvider) {
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			region, name, _ := strings.Cut(id, "/")
			vm, err := b.getVM(ctx, region, name)
			return instance(vm), err
		}
		b.delete = func(ctx context.Context, id string) error {
			region, name, _ := strings.Cut(id, "/")
			return b.do(ctx, "DeleteVM", func(ctx context.Context) error { return b.cloud.DeleteVM(ctx, b.cfg.Token, region, name) })
		}
	}, nil},
	{"unknown-state-waits", "UnknownStateIsStopped", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Power != "stopped" && vm.Power != "paused" && inst.State == contract.StateStopped {
				inst.State = contract.StateProvisioning
			}
			return inst, nil
		})
	}, nil},
	{"running-without-ip", "RunningRequiresIP", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Power == "running" {
				inst.State = contract.StateRunning
			}
			return inst, nil
		})
	}, nil},
	{"running-with-an-unreported-ip", "RunningRequiresIP", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Power == "running" && inst.IP == "" {
				inst.State, inst.IP = contract.StateRunning, "203.0.113.9"
			}
			return inst, nil
		})
	}, nil},
	{"uid-from-memory", "UIDAndCreatedAtReadBack", func(b *brokenProvider) {
		var uids sync.Map
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			uids.Store(inst.ProviderID, req.UID)
			return inst, err
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			uid, _ := uids.Load(id)
			inst.UID, _ = uid.(string)
			return inst, err
		}
	}, nil},
	{"list-ignores-marks", "ListByTagExcludesUnmarked", func(b *brokenProvider) {
		b.list = func(ctx context.Context, _, _ string) ([]contract.Instance, error) {
			return b.Provider.ListByTag(ctx, "", "")
		}
	}, nil},
	{"list-by-uid-alone", "ListByTagExcludesUnmarked", func(b *brokenProvider) {
		// Lists by the key asked for only: a VM with the UID label and
		// no managed label is taken for the operator's.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			var out []contract.Instance
			for _, region := range b.cfg.Regions {
				vms, err := b.cloud.ListVMs(ctx, b.cfg.Token, region, key, value)
				if err != nil {
					return nil, err
				}
				for _, vm := range vms {
					out = append(out, instance(vm))
				}
			}
			return out, nil
		}
	}, nil},
	{"create-adopts-uid-mark", "CreateNeverAdoptsUnmarked", func(b *brokenProvider) {
		// Resumes any VM of the name that carries the request's UID.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if vm, err := b.getVM(ctx, req.Placement.Region, req.Name); err == nil && vm.Labels[contract.LabelUID] == req.UID {
				return instance(vm), nil
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"deleting-looks-alive", "GetDuringDelete", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Deleting {
				inst.State = contract.StateStopped
			}
			return inst, nil
		})
	}, nil},
	{"lock-is-permanent", "GetDuringLock", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Lock != "" {
				return contract.Instance{}, contract.Permanentf("instance %s is locked (%s)", vm.Name, vm.Lock)
			}
			return inst, nil
		})
	}, nil},
	{"never-started-is-stopped", "NeverStartedIsNeverStopped", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if !vm.Started {
				inst.State = contract.StateStopped
			}
			return inst, nil
		})
	}, nil},
	{"ignores-network", "StaticAddressDelivered", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			req.Network = nil
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"network-drops-dns", "StaticAddressDelivered", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if req.Network != nil {
				n := *req.Network
				n.DNS = nil
				req.Network = &n
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"network-first-dns-only", "StaticAddressDelivered", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if req.Network != nil && len(req.Network.DNS) > 1 {
				n := *req.Network
				n.DNS = n.DNS[:1]
				req.Network = &n
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"network-gateway-assumed", "StaticAddressDelivered", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if req.Network != nil {
				n := *req.Network
				n.Gateway = n.Address.Masked().Addr().Next()
				req.Network = &n
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"reports-any-guest-ip", "StaticAddressDelivered", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if ip := contract.FirstRoutableIPv4(vm.IPs); vm.Network != nil && vm.Started && ip != "" {
				inst.State, inst.IP = contract.StateRunning, ip
			}
			return inst, nil
		})
	}, nil},
	{"network-unvalidated", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if req.Network != nil && req.Network.Validate() != nil {
				req.Network = nil
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"ignores-ctx", "CancelledContextReturnsPromptly", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			return b.Provider.Create(context.WithoutCancel(ctx), req)
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			return b.Provider.Get(context.WithoutCancel(ctx), id)
		}
	}, func(cfg *Config) { cfg.CallTimeout = 5 * time.Second }},
	{"no-call-timeout", "CallsAreBounded", func(*brokenProvider) {}, func(cfg *Config) { cfg.CallTimeout = time.Hour }},
	{"constructor-dials", "CallsAreBounded", func(b *brokenProvider) {
		// A login check at construction, with nothing bounding it.
		_ = b.cloud.WhoAmI(context.Background(), b.cfg.Token)
	}, nil},
	{"first-call-dials-unbounded", "CallsAreBounded", func(b *brokenProvider) {
		// The first call logs in outside the call's budget; every call
		// after it is bounded.
		var login sync.Once
		connect := func(ctx context.Context) {
			login.Do(func() { _ = b.cloud.WhoAmI(context.WithoutCancel(ctx), b.cfg.Token) })
		}
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			connect(ctx)
			return b.Provider.Create(ctx, req)
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			connect(ctx)
			return b.Provider.Get(ctx, id)
		}
	}, nil},
	{"check-order-unstable", "CheckerReasons", func(b *brokenProvider) {
		var n atomic.Int64
		b.check = func(ctx context.Context) []contract.CheckResult {
			r := b.Provider.Check(ctx)
			if n.Add(1)%2 == 0 {
				slices.Reverse(r)
			}
			return r
		}
	}, nil},
	{"check-credentials-last", "CheckerReasons", func(b *brokenProvider) {
		// A stable order, but the credentials after the locations.
		b.check = func(ctx context.Context) []contract.CheckResult {
			r := b.Provider.Check(ctx)
			return append(r[1:], r[0])
		}
	}, nil},
	{"cloudinit-logged", "SentinelCloudInit", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			logr.FromContextOrDiscard(ctx).V(3).Info("create request", contract.LogKeyInstance, req.Name, "cloudInit", string(req.CloudInit))
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"credential-in-error", "SentinelCredential", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err != nil {
				err = fmt.Errorf("create with token %s: %w", b.cfg.Token, err)
			}
			return inst, err
		}
	}, nil},
	{"no-child-spans", "ChildSpans", func(b *brokenProvider) {
		detach := func(ctx context.Context) context.Context {
			return trace.ContextWithSpan(ctx, trace.SpanFromContext(context.Background()))
		}
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			return b.Provider.Create(detach(ctx), req)
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			return b.Provider.Get(detach(ctx), id)
		}
		b.list = func(ctx context.Context, k, v string) ([]contract.Instance, error) {
			return b.Provider.ListByTag(detach(ctx), k, v)
		}
	}, nil},
	{"validates-after-backend-call", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			_ = b.cloud.WhoAmI(ctx, b.cfg.Token)
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"cloudinit-reencoded", "CloudInitByteForByte", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			req.CloudInit = bytes.ReplaceAll(req.CloudInit, []byte("\r\n"), []byte("\n"))
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"create-does-not-resume", "CreateResumesAfterFailure", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			spec, err := b.vmSpec(req)
			if err != nil {
				return contract.Instance{}, err
			}
			region := req.Placement.Region
			_ = b.cloud.CreateVolume(ctx, b.cfg.Token, region, spec.SeedVolume, req.CloudInit)
			var vm VM
			if err := b.do(ctx, "CreateVM", func(ctx context.Context) (err error) {
				vm, err = b.cloud.CreateVM(ctx, b.cfg.Token, region, spec)
				return err
			}); err != nil {
				return contract.Instance{}, err
			}
			if err := b.do(ctx, "StartVM", func(ctx context.Context) error {
				return b.cloud.StartVM(ctx, b.cfg.Token, region, req.Name)
			}); err != nil {
				return contract.Instance{}, err
			}
			vm.Started, vm.Power = true, "running"
			return instance(vm), nil
		}
	}, nil},
	{"adopts-unmarked", "CreateNeverAdoptsUnmarked", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if vm, err := b.getVM(ctx, req.Placement.Region, req.Name); err == nil {
				return instance(vm), nil
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"list-uid-first-match-only", "ListByTagFindsMarked", func(b *brokenProvider) {
		// A lookup by UID that stops at the first instance it finds.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			if key == contract.LabelUID && len(all) > 1 {
				all = all[:1]
			}
			return all, err
		}
	}, nil},
	{"list-uid-one-per-region", "ListByTagFindsMarked", func(b *brokenProvider) {
		// A lookup by UID that asks each region for one instance.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			if key != contract.LabelUID {
				return all, err
			}
			seen := map[string]bool{}
			return slices.DeleteFunc(all, func(i contract.Instance) bool {
				region, _, _ := strings.Cut(i.ProviderID, "/")
				dup := seen[region]
				seen[region] = true
				return dup
			}), err
		}
	}, nil},
	{"list-first-region-only", "ListByTagFindsMarked", func(b *brokenProvider) {
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			return slices.DeleteFunc(all, func(i contract.Instance) bool { return !strings.HasPrefix(i.ProviderID, b.cfg.Regions[0]+"/") }), err
		}
	}, nil},
	{"reports-any-address", "OnlyRoutableIPv4", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if len(vm.IPs) > 0 && vm.Power == "running" {
				inst.IP = vm.IPs[0]
			}
			return inst, nil
		})
	}, nil},
	{"errors-unclassified", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err != nil && !errors.Is(err, contract.ErrPermanent) {
				err = errors.New(err.Error())
			}
			return inst, err
		}
	}, nil},
	{"seed-volume-leaked", "DeleteLeavesNothing", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			region, name, err := ids.Parse(id)
			if err != nil {
				return err
			}
			err = b.do(ctx, "DeleteVM", func(ctx context.Context) error { return b.cloud.DeleteVM(ctx, b.cfg.Token, region, name) })
			if errors.Is(err, contract.ErrNotFound) {
				return nil
			}
			return err
		}
	}, nil},
	{"logs-without-instance", "LogLinesNameTheInstance", func(b *brokenProvider) {
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			logr.FromContextOrDiscard(ctx).V(1).Info("reading instance")
			return b.Provider.Get(ctx, id)
		}
	}, nil},
	{"logs-outside-ctx-logger", "LogLinesNameTheInstance", func(b *brokenProvider) {
		// Its own lines go to slog's default, with the instance named;
		// the logger in ctx gets none.
		quiet := func(ctx context.Context) context.Context { return logr.NewContext(ctx, logr.Discard()) }
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			slog.Info("creating instance", contract.LogKeyInstance, req.Name)
			return b.Provider.Create(quiet(ctx), req)
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			return b.Provider.Get(quiet(ctx), id)
		}
		b.delete = func(ctx context.Context, id string) error {
			slog.Info("deleting instance", contract.LogKeyInstance, id)
			return b.Provider.Delete(quiet(ctx), id)
		}
	}, nil},

	// Variants added when each check was made to test its rule rather than
	// one mistake (the first set of broken variants): each breaks one MUST in a way a provider
	// against a real cloud gets wrong.
	{"create-race-duplicates", "ConcurrentCallsAreSafe", func(b *brokenProvider) {
		// Looks the name up first, and on a name conflict makes a second,
		// differently named VM instead of resuming: sequential Creates
		// never meet the conflict, racing ones do.
		var n atomic.Int64
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			spec, err := b.vmSpec(req)
			if err != nil {
				return contract.Instance{}, err
			}
			region := req.Placement.Region
			if _, err := b.getVM(ctx, region, req.Name); !errors.Is(err, contract.ErrNotFound) {
				return b.Provider.Create(ctx, req)
			}
			_ = b.cloud.CreateVolume(ctx, b.cfg.Token, region, spec.SeedVolume, req.CloudInit)
			vm, err := b.cloud.CreateVM(ctx, b.cfg.Token, region, spec)
			if isConflict(err) {
				spec.Name = fmt.Sprintf("%s-r%d", spec.Name, n.Add(1))
				vm, err = b.cloud.CreateVM(ctx, b.cfg.Token, region, spec)
			}
			if err != nil {
				return contract.Instance{}, classify(err)
			}
			if err := b.cloud.StartVM(ctx, b.cfg.Token, region, vm.Name); err != nil {
				return contract.Instance{}, classify(err)
			}
			vm.Started, vm.Power = true, "running"
			return instance(vm), nil
		}
	}, nil},
	{"delete-overlap-fails", "ConcurrentCallsAreSafe", func(b *brokenProvider) {
		// Refuses a Delete while another holds the instance.
		var busy sync.Map
		b.delete = func(ctx context.Context, id string) error {
			if _, held := busy.LoadOrStore(id, true); held {
				return fmt.Errorf("instance %s: a delete is already running", id)
			}
			defer busy.Delete(id)
			time.Sleep(20 * time.Millisecond)
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"list-last-region-only", "ListByTagCoversEveryLocation", func(b *brokenProvider) {
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			last := b.cfg.Regions[len(b.cfg.Regions)-1]
			return slices.DeleteFunc(all, func(i contract.Instance) bool { return !strings.HasPrefix(i.ProviderID, last+"/") }), err
		}
	}, nil},
	{"network-lost-on-resume", "CreateResumesAfterFailure", func(b *brokenProvider) {
		// Sets the static network as a step after the VM is made (a
		// config update after a clone), and on resume, finding the VM,
		// only starts it: a cut between the two leaves the guest without
		// its address.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			region := req.Placement.Region
			if req.Network == nil {
				return b.Provider.Create(ctx, req)
			}
			if _, err := b.getVM(ctx, region, req.Name); err == nil {
				return b.Provider.Create(ctx, req)
			}
			bare := req
			bare.Network = nil
			inst, err := b.Provider.Create(ctx, bare)
			if err != nil {
				return inst, err
			}
			n := *req.Network
			b.cloud.mu.Lock()
			b.cloud.regions[region].vms[req.Name].Network = &n
			b.cloud.mu.Unlock()
			return inst, nil
		}
	}, nil},
	{"delete-locked-returns-nil", "GetDuringLock", func(b *brokenProvider) {
		// Reads the backend's "locked" refusal of a delete as done: the
		// operator releases the Proxy, and the VM stays for good.
		b.delete = func(ctx context.Context, id string) error {
			var apiErr *APIError
			err := b.Provider.Delete(ctx, id)
			if errors.As(err, &apiErr) && apiErr.Status == 409 {
				return nil
			}
			return err
		}
	}, nil},
	{"shared-lists-share-nothing", "SharedListsAreFresh", func(b *brokenProvider) {
		// Says it shares its listings (so the operator lets its calls
		// wait without a call slot) but lists once per call: every
		// answer is fresh, and a fleet's calls list the region as many
		// times as there are calls.
		b.shares = true
	}, nil},
	{"shared-lists-stale", "SharedListsAreFresh", func(b *brokenProvider) {
		// Shares its listings, but a call joins the listing under way,
		// begun before it, rather than the next one.
		b.shares = true
		var mu sync.Mutex
		type run struct {
			done  chan struct{}
			found []contract.Instance
			err   error
		}
		under := map[[2]string]*run{}
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			k := [2]string{key, value}
			mu.Lock()
			r, ok := under[k]
			if !ok {
				r = &run{done: make(chan struct{})}
				under[k] = r
				go func() {
					r.found, r.err = b.Provider.ListByTag(context.WithoutCancel(ctx), key, value)
					time.Sleep(50 * time.Millisecond) // a large folder takes a while to read
					mu.Lock()
					delete(under, k)
					mu.Unlock()
					close(r.done)
				}()
			}
			mu.Unlock()
			select {
			case <-r.done:
				return r.found, r.err
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
	}, nil},
	{"delete-stops-at-missing-vm", "DeleteResumesAfterFailure", func(b *brokenProvider) {
		// Takes a missing VM for a finished delete and never reaches the
		// seed volume a cut-off Delete left.
		b.delete = func(ctx context.Context, id string) error {
			region, name, err := ids.Parse(id)
			if err != nil {
				return err
			}
			err = b.do(ctx, "DeleteVM", func(ctx context.Context) error { return b.cloud.DeleteVM(ctx, b.cfg.Token, region, name) })
			if errors.Is(err, contract.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"delete-ignores-seed-failure", "DeleteResumesAfterFailure", func(b *brokenProvider) {
		// Deletes the seed best-effort and reports success whatever
		// happened: the operator releases the Proxy on a nil Delete.
		b.delete = func(ctx context.Context, id string) error {
			region, name, err := ids.Parse(id)
			if err != nil {
				return err
			}
			err = b.do(ctx, "DeleteVM", func(ctx context.Context) error { return b.cloud.DeleteVM(ctx, b.cfg.Token, region, name) })
			if err != nil && !errors.Is(err, contract.ErrNotFound) {
				return err
			}
			_ = b.do(ctx, "DeleteVolume", func(ctx context.Context) error {
				return b.cloud.DeleteVolume(ctx, b.cfg.Token, region, seedVolume(name))
			})
			return nil
		}
	}, nil},
	{"adopts-another-proxys", "CreateNeverAdoptsUnmarked", func(b *brokenProvider) {
		// Checks only that a same-name VM is managed, not whose it is.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if vm, err := b.getVM(ctx, req.Placement.Region, req.Name); err == nil && vm.Labels[contract.LabelManaged] != "" {
				return instance(vm), nil
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"deletes-unmarked-namesake", "CreateNeverAdoptsUnmarked", func(b *brokenProvider) {
		// Clears the name for its own VM by deleting whatever holds it.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if vm, err := b.getVM(ctx, req.Placement.Region, req.Name); err == nil && vm.Labels[contract.LabelManaged] == "" {
				b.cloud.mu.Lock()
				delete(b.cloud.regions[req.Placement.Region].vms, req.Name)
				b.cloud.mu.Unlock()
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"unauthorized-is-not-found", "RejectedCredentialIsNotGone", func(b *brokenProvider) {
		// Reads every 4xx of a lookup as "no such VM".
		notFound := func(err error) bool { var api *APIError; return errors.As(err, &api) && api.Status/100 == 4 }
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			if notFound(err) && !errors.Is(err, contract.ErrNotFound) {
				return inst, fmt.Errorf("%w: %s", contract.ErrNotFound, id)
			}
			return inst, err
		}
		b.delete = func(ctx context.Context, id string) error {
			if err := b.Provider.Delete(ctx, id); !notFound(err) {
				return err
			}
			return nil
		}
	}, nil},
	{"seed-exists-is-an-error", "CreateResumesAfterFailure", func(b *brokenProvider) {
		// Uploads the seed unconditionally, so a Create cut off after the
		// upload can never be resumed.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if err := req.Validate(); err == nil {
				if _, err := b.getVM(ctx, req.Placement.Region, req.Name); errors.Is(err, contract.ErrNotFound) {
					if err := b.do(ctx, "CreateVolume", func(ctx context.Context) error {
						return b.cloud.CreateVolume(ctx, b.cfg.Token, req.Placement.Region, seedVolume(req.Name), req.CloudInit)
					}); err != nil {
						return contract.Instance{}, err
					}
				}
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"cut-connection-is-permanent", "CreateResumesAfterFailure", func(b *brokenProvider) {
		// Classifies a reset connection (502) as a refusal.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			var api *APIError
			if errors.As(err, &api) && api.Status == 502 {
				err = contract.Permanent(err)
			}
			return inst, err
		}
	}, nil},
	{"name-truncated-to-fit", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if len(req.Name) > 63 {
				req.Name = req.Name[:63]
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"port-defaulted", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if req.Port == 0 {
				req.Port = 3128
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"cloudinit-limit-off-by-one", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if len(req.CloudInit) >= MaxVolumeBytes {
				return contract.Instance{}, contract.InvalidField("cloudInit", fmt.Sprintf("%d bytes", len(req.CloudInit)), "too large")
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"zone-silently-ignored", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			req.Placement.Zone = ""
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"error-names-value-not-field", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if fe := (*contract.FieldError)(nil); errors.As(err, &fe) {
				err = contract.Permanentf("invalid value %q", fe.Value)
			}
			return inst, err
		}
	}, nil},
	{"malformed-id-unnamed", "MalformedID", func(b *brokenProvider) {
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			if errors.Is(err, contract.ErrPermanent) {
				err = contract.Permanentf("malformed providerID")
			}
			return inst, err
		}
	}, nil},
	{"created-at-is-now", "UIDAndCreatedAtReadBack", func(b *brokenProvider) {
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			inst.CreatedAt = time.Now().UTC().Truncate(time.Second)
			return inst, err
		}
	}, nil},
	{"list-without-created-at", "UIDAndCreatedAtReadBack", func(b *brokenProvider) {
		// Lists fewer properties than Get reads.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			for i := range all {
				all[i].CreatedAt = time.Time{}
			}
			return all, err
		}
	}, nil},
	{"uid-mark-missing", "ListByTagFindsMarked", func(b *brokenProvider) {
		// Marks the VM managed but never writes its UID.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err == nil {
				b.cloud.mu.Lock()
				delete(b.cloud.regions[req.Placement.Region].vms[req.Name].Labels, contract.LabelUID)
				b.cloud.mu.Unlock()
			}
			return inst, err
		}
	}, nil},
	{"locked-unstarted-is-stopped", "GetDuringLock", func(b *brokenProvider) {
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Lock != "" && vm.Power != "running" {
				inst.State = contract.StateStopped
			}
			return inst, nil
		})
	}, nil},
	{"two-classes", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if errors.Is(err, contract.ErrQuota) {
				err = fmt.Errorf("%w: %w", contract.ErrPermanent, err)
			}
			return inst, err
		}
	}, nil},
	// Only the call that names the operation keeps its class; a later
	// step's error is flattened to text, as a provider that wraps its
	// follow-up calls with %v does. The first-call faults all land on
	// the named call and pass; a fault on a later call is the shape.
	{"create-later-step-unclassified", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err != nil && !strings.Contains(err.Error(), "memcloud CreateVM:") {
				err = fmt.Errorf("create %s: %v", req.Name, err) //nolint:errorlint // the breach
			}
			return inst, err
		}
	}, nil},
	{"delete-later-step-unclassified", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			err := b.Provider.Delete(ctx, id)
			if err != nil && strings.Contains(err.Error(), "memcloud DeleteVolume:") {
				err = fmt.Errorf("delete the seed of %s: %v", id, err) //nolint:errorlint // the breach
			}
			return err
		}
	}, nil},
	{"list-later-region-unclassified", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			found, err := b.Provider.ListByTag(ctx, key, value)
			if err != nil && !strings.Contains(err.Error(), fmt.Sprintf("list region %q", b.cfg.Regions[0])) {
				err = fmt.Errorf("list: %v", err) //nolint:errorlint // the breach
			}
			return found, err
		}
	}, nil},
	{"list-drops-later-refused-region", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		// Reads the first region strictly and every other one as best
		// effort: a refused later region is left out of a nil answer.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			var out []contract.Instance
			for i, region := range b.cfg.Regions {
				var vms []VM
				err := b.do(ctx, "ListVMs", func(ctx context.Context) (err error) {
					vms, err = b.cloud.ListVMs(ctx, b.cfg.Token, region, key, value)
					return err
				})
				switch {
				case err != nil && i == 0:
					return nil, err
				case err != nil:
					continue
				}
				for _, vm := range vms {
					if vm.Labels[contract.LabelManaged] != "" {
						out = append(out, instance(vm))
					}
				}
			}
			return out, nil
		}
	}, nil},
	{"egress-allocated-per-racer", "ConcurrentCallsAreSafe", func(b *brokenProvider) {
		// Finds the replica's address, or allocates one, and attaches
		// it, as the reference provider did before it read its
		// addresses again: racing Creates of one request each allocate
		// one, and all but the attached one stay, marked as the
		// replica's.
		plain := &Provider{cfg: b.cfg, cloud: b.cloud}
		plain.cfg.Egress = false
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := plain.Create(ctx, req)
			if err != nil {
				return inst, err
			}
			region := req.Placement.Region
			kept, err := b.addressesOf(ctx, region, req.UID, req.Replica)
			if err != nil {
				return contract.Instance{}, err
			}
			var a Address
			if len(kept) > 0 {
				a = kept[0]
			} else if err := b.do(ctx, "AllocateAddress", func(ctx context.Context) (err error) {
				a, err = b.cloud.AllocateAddress(ctx, b.cfg.Token, region, map[string]string{
					contract.LabelManaged: req.Owner, contract.LabelUID: req.UID, contract.LabelReplica: strconv.Itoa(int(req.Replica)),
				})
				return err
			}); err != nil {
				return contract.Instance{}, err
			}
			if err := b.do(ctx, "AttachAddress", func(ctx context.Context) error {
				return b.cloud.AttachAddress(ctx, b.cfg.Token, region, a.IP, req.Name)
			}); err != nil {
				return contract.Instance{}, err
			}
			inst.EgressIP = a.IP
			return inst, nil
		}
	}, nil},
	{"bare-sentinel", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			if errors.Is(err, contract.ErrNotFound) {
				err = fmt.Errorf("get %s: %w", id, contract.ErrNotFound)
			}
			return inst, err
		}
	}, nil},
	{"delete-passes-over-refused-volume", "RejectedCredentialIsNotGone", func(b *brokenProvider) {
		// The seed volume's delete, after the VM's, takes a 401 for
		// "someone else cleans up": a credential refused there reads as
		// done, and the seed (with the CloudInit) outlives the Proxy.
		// Every other error still fails the Delete.
		b.delete = func(ctx context.Context, id string) error {
			region, name, err := ids.Parse(id)
			if err != nil {
				return err
			}
			ctx = logr.NewContext(ctx, logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, id))
			err = b.do(ctx, "DeleteVM", func(ctx context.Context) error { return b.cloud.DeleteVM(ctx, b.cfg.Token, region, name) })
			if err != nil && !errors.Is(err, contract.ErrNotFound) {
				return err
			}
			err = b.do(ctx, "DeleteVolume", func(ctx context.Context) error {
				return b.cloud.DeleteVolume(ctx, b.cfg.Token, region, seedVolume(name))
			})
			var api *APIError
			refused := errors.As(err, &api) && api.Status == 401
			if err != nil && !errors.Is(err, contract.ErrNotFound) && !refused {
				return err
			}
			logr.FromContextOrDiscard(ctx).V(contract.LogOutcome).Info("deleted instance")
			return nil
		}
	}, nil},
	{"delete-404-is-an-error", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			region, name, err := ids.Parse(id)
			if err != nil {
				return err
			}
			if err := b.do(ctx, "DeleteVM", func(ctx context.Context) error { return b.cloud.DeleteVM(ctx, b.cfg.Token, region, name) }); err != nil {
				return err
			}
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"seed-leaked-on-refused-create", "ErrorsCarryTheirClass", func(b *brokenProvider) {
		// Uploads the seed, then gives up when the VM is refused, leaving
		// the seed (and the cloud-init in it) where no sweep finds it.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			spec, err := b.vmSpec(req)
			if err != nil {
				return contract.Instance{}, err
			}
			region := req.Placement.Region
			if _, err := b.getVM(ctx, region, req.Name); errors.Is(err, contract.ErrNotFound) {
				_ = b.do(ctx, "CreateVolume", func(ctx context.Context) error {
					return b.cloud.CreateVolume(ctx, b.cfg.Token, region, spec.SeedVolume, req.CloudInit)
				})
				if err := b.do(ctx, "CreateVM", func(ctx context.Context) error {
					_, err := b.cloud.CreateVM(ctx, b.cfg.Token, region, spec)
					return err
				}); err != nil && !isConflict(err) {
					return contract.Instance{}, err
				}
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"cancel-error-drops-ctx", "CancelledContextReturnsPromptly", func(b *brokenProvider) {
		drop := func(ctx context.Context, err error) error {
			if err != nil && ctx.Err() != nil {
				return fmt.Errorf("call interrupted: %v", err) //nolint:errorlint // the break under test
			}
			return err
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			return inst, drop(ctx, err)
		}
	}, nil},
	{"check-timeout-is-backend-error", "CheckerReasons", func(b *brokenProvider) {
		b.check = func(ctx context.Context) []contract.CheckResult {
			r := b.Provider.Check(ctx)
			for i := range r {
				if r[i].Reason == contract.ReasonTimeout {
					r[i].Reason = contract.ReasonBackendError
				}
			}
			return r
		}
	}, nil},
	{"cloudinit-base64-in-span", "SentinelCloudInit", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			trace.SpanFromContext(ctx).SetAttributes(attribute.String("guestinfo.userdata", base64.StdEncoding.EncodeToString(req.CloudInit)))
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"cloudinit-on-stderr", "SentinelCloudInit", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err != nil {
				fmt.Fprintf(os.Stderr, "create failed; request body: %s\n", req.CloudInit)
			}
			return inst, err
		}
	}, nil},
	{"token-in-slog", "SentinelCredential", func(b *brokenProvider) {
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			slog.Debug("listing", "token", b.cfg.Token)
			return b.Provider.ListByTag(ctx, key, value)
		}
	}, nil},
	{"delete-without-spans", "ChildSpans", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			return b.Provider.Delete(trace.ContextWithSpan(ctx, trace.SpanFromContext(context.Background())), id)
		}
	}, nil},
	{"log-instance-key-wrong", "LogLinesNameTheInstance", func(b *brokenProvider) {
		b.delete = func(ctx context.Context, id string) error {
			logr.FromContextOrDiscard(ctx).WithValues(contract.LogKeyInstance, "unknown").V(1).Info("deleting")
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"cloudinit-coerced-to-text", "CloudInitByteForByte", func(b *brokenProvider) {
		// Carries user-data as a JSON string, which replaces invalid UTF-8.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			req.CloudInit = []byte(strings.ToValidUTF8(string(req.CloudInit), "\uFFFD"))
			return b.Provider.Create(ctx, req)
		}
	}, nil},

	// Variants added with contract v0.3.0: the managed mark
	// names its owner, so installs and entries sharing a backend each see
	// only their own instances.
	{"owner-written-as-true", "ListByTagSeparatesOwners", func(b *brokenProvider) {
		// Still writes the v0.2 constant instead of req.Owner.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err == nil {
				b.cloud.mu.Lock()
				b.cloud.regions[req.Placement.Region].vms[req.Name].Labels[contract.LabelManaged] = contract.LegacyManagedValue
				b.cloud.mu.Unlock()
				inst.Owner = contract.LegacyManagedValue
			}
			return inst, err
		}
	}, nil},
	{"list-ignores-owner", "ListByTagSeparatesOwners", func(b *brokenProvider) {
		// Lists every managed instance, whatever the mark's value.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			if key != contract.LabelManaged {
				return b.Provider.ListByTag(ctx, key, value)
			}
			all, err := b.Provider.ListByTag(ctx, "", "")
			return slices.DeleteFunc(all, func(i contract.Instance) bool { return i.Owner == "" }), err
		}
	}, nil},
	{"legacy-lists-every-owner", "ListByTagSeparatesOwners", func(b *brokenProvider) {
		// Takes the legacy value for "any owner", so an upgraded operator's
		// sweep of its legacy instances sees every install's.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			if key != contract.LabelManaged || value != contract.LegacyManagedValue {
				return b.Provider.ListByTag(ctx, key, value)
			}
			all, err := b.Provider.ListByTag(ctx, "", "")
			return slices.DeleteFunc(all, func(i contract.Instance) bool { return i.Owner == "" }), err
		}
	}, nil},
	{"uid-list-needs-legacy-mark", "ListByTagSeparatesOwners", func(b *brokenProvider) {
		// Filters a UID list on the v0.2 managed value as well, so it
		// finds only legacy instances.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			if key == contract.LabelUID {
				all = slices.DeleteFunc(all, func(i contract.Instance) bool { return i.Owner != contract.LegacyManagedValue })
			}
			return all, err
		}
	}, nil},
	{"powered-off-is-terminated", "PoweredOffIsStopped", func(b *brokenProvider) {
		// Reads a VM powered off as one being deleted (a backend whose
		// delete powers off first, read by power state alone): the
		// operator would forget a dead proxy instead of replacing it.
		b.get = mapGet(b.Provider, func(inst contract.Instance, vm VM) (contract.Instance, error) {
			if vm.Power == "stopped" {
				inst.State, inst.IP = contract.StateTerminated, ""
			}
			return inst, nil
		})
	}, nil},
	{"powered-off-listed-terminated", "PoweredOffIsStopped", func(b *brokenProvider) {
		// Get reads the power state, but the listing maps it to
		// Terminated, so the GC's and the replica census's view is wrong.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			for i := range all {
				if all[i].State == contract.StateStopped {
					all[i].State = contract.StateTerminated
				}
			}
			return all, err
		}
	}, nil},
	{"unguarded-cache", "ConcurrentCallsAreSafe", func(b *brokenProvider) {
		// Keeps the instances it made in a map no lock guards: Create
		// stores, Get answers a Running one from it, Delete forgets. In
		// ConcurrentCallsAreSafe nothing stops an instance but its Delete,
		// so every answer there is right; concurrent calls write the map
		// at once, a data race only the race detector sees (raceOnly).
		cache := map[string]contract.Instance{}
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err == nil {
				cache[inst.ProviderID] = inst
			}
			return inst, err
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			if inst, ok := cache[id]; ok && inst.State == contract.StateRunning {
				return inst, nil
			}
			return b.Provider.Get(ctx, id)
		}
		b.delete = func(ctx context.Context, id string) error {
			delete(cache, id)
			return b.Provider.Delete(ctx, id)
		}
	}, nil},
	{"race-loser-drops-seed", "ConcurrentCallsAreSafe", func(b *brokenProvider) {
		// A Create that raced another of the same name and finished
		// after it takes the seed volume for its own orphan and deletes
		// it: the winner's guest is left without its user-data.
		var mu sync.Mutex
		inFlight, raced, done := map[string]int{}, map[string]bool{}, map[string]int{}
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			mu.Lock()
			inFlight[req.Name]++
			raced[req.Name] = raced[req.Name] || inFlight[req.Name] > 1
			mu.Unlock()
			inst, err := b.Provider.Create(ctx, req)
			mu.Lock()
			inFlight[req.Name]--
			done[req.Name]++
			loser := err == nil && raced[req.Name] && done[req.Name] > 1
			mu.Unlock()
			if loser {
				_ = b.cloud.DeleteVolume(ctx, b.cfg.Token, req.Placement.Region, seedVolume(req.Name))
			}
			return inst, err
		}
	}, nil},
	{"owner-matched-by-prefix", "ListByTagSeparatesOwners", func(b *brokenProvider) {
		// Matches the managed mark's value by prefix (a tag search with a
		// wildcard, a "starts with" filter), so an install whose Owner
		// extends another's is listed by it.
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			if key != contract.LabelManaged {
				return b.Provider.ListByTag(ctx, key, value)
			}
			all, err := b.Provider.ListByTag(ctx, "", "")
			return slices.DeleteFunc(all, func(i contract.Instance) bool { return !strings.HasPrefix(i.Owner, value) }), err
		}
	}, nil},
	{"owner-truncated", "ListByTagSeparatesOwners", func(b *brokenProvider) {
		// Writes at most 40 characters of the Owner (a backend's tag
		// length), and reads back what it wrote.
		const limit = 40
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err == nil && len(req.Owner) > limit {
				b.cloud.mu.Lock()
				b.cloud.regions[req.Placement.Region].vms[req.Name].Labels[contract.LabelManaged] = req.Owner[:limit]
				b.cloud.mu.Unlock()
				inst.Owner = req.Owner[:limit]
			}
			return inst, err
		}
	}, nil},
	{"owner-not-read-back", "UIDAndCreatedAtReadBack", func(b *brokenProvider) {
		// Fills Owner in Create's answer but never reads the mark back.
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			inst.Owner = ""
			return inst, err
		}
		b.list = func(ctx context.Context, key, value string) ([]contract.Instance, error) {
			all, err := b.Provider.ListByTag(ctx, key, value)
			for i := range all {
				all[i].Owner = ""
			}
			return all, err
		}
	}, nil},
	{"owner-from-memory", "UIDAndCreatedAtReadBack", func(b *brokenProvider) {
		var owners sync.Map
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			owners.Store(inst.ProviderID, req.Owner)
			return inst, err
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			owner, _ := owners.Load(id)
			inst.Owner, _ = owner.(string)
			return inst, err
		}
	}, nil},
	{"owner-remembered-at-create", "CreateAdoptsAnyOwner", func(b *brokenProvider) {
		// Reads the mark back only for an instance it did not create
		// itself: right after a restart, wrong once a Create under another
		// Owner adopted the instance.
		var owners sync.Map
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err == nil {
				owners.Store(inst.ProviderID, req.Owner)
				inst.Owner = req.Owner
			}
			return inst, err
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			inst, err := b.Provider.Get(ctx, id)
			if owner, ok := owners.Load(id); ok && err == nil {
				inst.Owner = owner.(string)
			}
			return inst, err
		}
	}, nil},
	{"adopts-only-its-own-owner", "CreateAdoptsAnyOwner", func(b *brokenProvider) {
		// Takes the same name and UID under another mark for a collision.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if err := req.Validate(); err == nil {
				vm, err := b.getVM(ctx, req.Placement.Region, req.Name)
				if err == nil && vm.Labels[contract.LabelManaged] != req.Owner {
					return contract.Instance{}, contract.Permanentf("instance %q already exists and belongs to %q", req.Name, vm.Labels[contract.LabelManaged])
				}
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"owner-defaulted", "InvalidRequestRejectedBeforeBackend", func(b *brokenProvider) {
		// Validates the v0.2 fields only and falls back to a default owner.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			if owned := req; owned.Owner != "default" {
				owned.Owner = "default"
				if owned.Validate() == nil && req.Validate() != nil {
					req = owned
				}
			}
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"cloudinit-gzipped-in-debug-log", "SentinelCloudInit", func(b *brokenProvider) {
		// Gzips CloudInit for a size limit, as vSphere's guestinfo and a
		// config drive invite, and logs the encoded payload at debug level.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write(req.CloudInit)
			_ = zw.Close()
			logr.FromContextOrDiscard(ctx).V(4).Info("user data", contract.LogKeyInstance, req.Name, "encoding", "gzip+base64", "value", base64.StdEncoding.EncodeToString(z.Bytes()))
			return b.Provider.Create(ctx, req)
		}
	}, nil},
	{"credential-in-hidden-cause", "SentinelCredential", func(b *brokenProvider) {
		// Its error's message is clean; the cause it wraps, which anyone
		// who unwraps it may log, quotes the request with its token.
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			inst, err := b.Provider.Create(ctx, req)
			if err != nil {
				err = hiddenCause{fmt.Errorf("POST /vms Authorization: Bearer %s: %w", b.cfg.Token, err)}
			}
			return inst, err
		}
	}, nil},
}

// hiddenCause is an error whose message does not show the cause it wraps.
type hiddenCause struct{ cause error }

func (h hiddenCause) Error() string { return "the request failed" }
func (h hiddenCause) Unwrap() error { return h.cause }
