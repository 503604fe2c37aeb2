package memprovider

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/trace"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// The harness must be able to fail (contract §11): each variant below breaks
// the reference provider the way a real provider gets it wrong, and the
// rule named beside it must catch it. TestBrokenVariantsAreCaught runs the
// harness on each in a child process, since a failing subtest fails its
// parent.

// brokenProvider is the reference provider with some methods replaced.
type brokenProvider struct {
	*Provider
	create func(context.Context, contract.CreateRequest) (contract.Instance, error)
	get    func(context.Context, string) (contract.Instance, error)
	delete func(context.Context, string) error
	list   func(context.Context, string, string) ([]contract.Instance, error)
	check  func(context.Context) []contract.CheckResult
}

func (b *brokenProvider) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	if b.create != nil {
		return b.create(ctx, req)
	}
	return b.Provider.Create(ctx, req)
}

func (b *brokenProvider) Get(ctx context.Context, id string) (contract.Instance, error) {
	if b.get != nil {
		return b.get(ctx, id)
	}
	return b.Provider.Get(ctx, id)
}

func (b *brokenProvider) Delete(ctx context.Context, id string) error {
	if b.delete != nil {
		return b.delete(ctx, id)
	}
	return b.Provider.Delete(ctx, id)
}

func (b *brokenProvider) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	if b.list != nil {
		return b.list(ctx, key, value)
	}
	return b.Provider.ListByTag(ctx, key, value)
}

func (b *brokenProvider) Check(ctx context.Context) []contract.CheckResult {
	if b.check != nil {
		return b.check(ctx)
	}
	return b.Provider.Check(ctx)
}

// mapGet returns a get that post-processes the reference Get's answer,
// with the backend's VM at hand.
func mapGet(p *Provider, fn func(contract.Instance, VM) (contract.Instance, error)) func(context.Context, string) (contract.Instance, error) {
	return func(ctx context.Context, id string) (contract.Instance, error) {
		inst, err := p.Get(ctx, id)
		if err != nil {
			return inst, err
		}
		region, name, _ := ids.Parse(id)
		vm, err := p.getVM(ctx, region, name)
		if err != nil {
			return inst, err
		}
		return fn(inst, vm)
	}
}

// variant is one deliberately broken provider and the rule that must catch
// it.
type variant struct {
	name   string
	rule   string
	apply  func(b *brokenProvider)
	config func(cfg *Config) // nil: the test config as it is
}

var variants = []variant{
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
	{"ignores-ctx", "CancelledContextReturnsPromptly", func(b *brokenProvider) {
		b.create = func(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
			return b.Provider.Create(context.WithoutCancel(ctx), req)
		}
		b.get = func(ctx context.Context, id string) (contract.Instance, error) {
			return b.Provider.Get(context.WithoutCancel(ctx), id)
		}
	}, func(cfg *Config) { cfg.CallTimeout = 5 * time.Second }},
	{"no-call-timeout", "CallsAreBounded", func(*brokenProvider) {}, func(cfg *Config) { cfg.CallTimeout = time.Hour }},
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
}

// brokenEnv names the variant a child process runs.
const brokenEnv = "MEMPROVIDER_BROKEN_VARIANT"

// TestBrokenVariant runs the harness on the variant brokenEnv names; it
// only runs as TestBrokenVariantsAreCaught's child.
func TestBrokenVariant(t *testing.T) {
	name := os.Getenv(brokenEnv)
	if name == "" {
		t.Skip("runs only as the child of TestBrokenVariantsAreCaught")
	}
	i := slices.IndexFunc(variants, func(v variant) bool { return v.name == name })
	if i < 0 {
		t.Fatalf("no variant %q", name)
	}
	v := variants[i]
	cloud, cfg := testSetup(t)
	if v.config != nil {
		v.config(&cfg)
	}
	contracttest.Run(t, harnessConfig(cloud, func(t *testing.T) contract.Provider {
		p, err := New(cfg, cloud)
		if err != nil {
			t.Fatal(err)
		}
		b := &brokenProvider{Provider: p}
		v.apply(b)
		return b
	}))
}

// TestBrokenVariantsAreCaught proves the harness can fail: each broken
// variant makes its rule's subtest fail.
func TestBrokenVariantsAreCaught(t *testing.T) {
	if os.Getenv(brokenEnv) != "" {
		t.Skip("child process")
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestBrokenVariant$/^"+v.rule+"$", "-test.v", "-test.timeout=2m")
			cmd.Env = append(os.Environ(), brokenEnv+"="+v.name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("the harness passed the %s variant; rule %s did not catch it:\n%s", v.name, v.rule, out)
			}
			if !strings.Contains(string(out), "--- FAIL: TestBrokenVariant/"+v.rule+" ") {
				t.Fatalf("rule %s did not fail on the %s variant (the child failed otherwise):\n%s", v.rule, v.name, out)
			}
		})
	}
}

// TestEveryRuleHasABrokenVariant keeps the proof complete as rules are
// added.
func TestEveryRuleHasABrokenVariant(t *testing.T) {
	for _, rule := range contracttest.RuleNames() {
		if !slices.ContainsFunc(variants, func(v variant) bool { return v.rule == rule }) {
			t.Errorf("rule %s has no broken variant that proves it can fail", rule)
		}
	}
}
