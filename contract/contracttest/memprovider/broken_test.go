package memprovider

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

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
	// listEgress and releaseEgress replace the EgressKeeper calls.
	listEgress    func(context.Context, string) ([]contract.Egress, error)
	releaseEgress func(context.Context, contract.Egress) error
	// shares is what SharesLists answers (contract.SharedLister).
	shares bool
}

func (b *brokenProvider) SharesLists() bool { return b.shares }

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

func (b *brokenProvider) ListEgress(ctx context.Context, owner string) ([]contract.Egress, error) {
	if b.listEgress != nil {
		return b.listEgress(ctx, owner)
	}
	return b.Provider.ListEgress(ctx, owner)
}

func (b *brokenProvider) ReleaseEgress(ctx context.Context, e contract.Egress) error {
	if b.releaseEgress != nil {
		return b.releaseEgress(ctx, e)
	}
	return b.Provider.ReleaseEgress(ctx, e)
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
			if why := raceOnly[v.name]; why != "" && !raceEnabled {
				t.Skipf("needs the race detector (go test -race): %s", why)
			}
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

// raceOnly are the variants whose breach only the race detector sees,
// with why; without it they are skipped (make test runs -race).
var raceOnly = map[string]string{
	"unguarded-cache": "its one breach is a data race; without the detector, concurrent map writes may instead end the child process",
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

// TestEveryMustHasABrokenVariant holds provider-contract.md §11's table
// of MUSTs to the variants: every variant it names exists and is run
// against a rule of its row, every variant is in it, and it has a row for
// every MUST in §1–§9, so a MUST added to the contract needs a row (and a
// variant, or the place it is checked instead).
func TestEveryMustHasABrokenVariant(t *testing.T) {
	b, err := os.ReadFile("../../../docs/provider-contract.md")
	if os.IsNotExist(err) {
		t.Skip("skipped: docs/provider-contract.md is not beside this module (built from the module cache)")
	}
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	start := strings.Index(doc, "### Every MUST and the broken provider")
	end := strings.Index(doc, "Mutation testing measures")
	body, rules := doc[strings.Index(doc, "## 1. "):strings.Index(doc, "## 10. ")], doc[start:end]
	if start < 0 || end < start {
		t.Fatal("provider-contract.md §11 has no table of MUSTs")
	}
	rowRE := regexp.MustCompile(`(?m)^\| ([^|]+) \| ([^|]+) \| ([^|]+) \| ([^|]+) \|$`)
	named := map[string]bool{}
	sectionRows := 0
	for _, row := range rowRE.FindAllStringSubmatch(rules, -1) {
		section, must, ruleCol, variantCol := row[1], row[2], row[3], strings.TrimSpace(row[4])
		if section == "§" || strings.HasPrefix(section, "---") {
			continue
		}
		if regexp.MustCompile(`^\d`).MatchString(section) {
			sectionRows++
		}
		if variantCol == "—" {
			if !strings.HasPrefix(ruleCol, "not by the harness") {
				t.Errorf("§%s %q has no broken variant and does not say where it is checked", section, must)
			}
			continue
		}
		rowRules := regexp.MustCompile("`([A-Za-z0-9]+)`").FindAllStringSubmatch(ruleCol, -1)
		for _, name := range strings.Split(variantCol, ", ") {
			named[name] = true
			i := slices.IndexFunc(variants, func(v variant) bool { return v.name == name })
			if i < 0 {
				t.Errorf("§%s %q names the variant %s, which does not exist", section, must, name)
				continue
			}
			if !slices.ContainsFunc(rowRules, func(m []string) bool { return m[1] == variants[i].rule }) {
				t.Errorf("§%s %q: the variant %s is run against %s, not a rule of the row (%s)", section, must, name, variants[i].rule, ruleCol)
			}
		}
	}
	for _, v := range variants {
		if !named[v.name] {
			t.Errorf("the variant %s (rule %s) is in no row of the table of MUSTs", v.name, v.rule)
		}
	}
	if musts := len(regexp.MustCompile(`\bMUST\b`).FindAllString(body, -1)); sectionRows < musts {
		t.Errorf("the table of MUSTs has %d rows for §1–§9, which say MUST %d times: a MUST has no row", sectionRows, musts)
	}
}

// listEgressWith is ListEgress broken at an address without a replica
// mark: it stops listing there (stop), or lists it as replica 0 (list).
func (b *brokenProvider) listEgressWith(ctx context.Context, owner string, stop, list bool) ([]contract.Egress, error) {
	var out []contract.Egress
	for _, region := range b.cfg.Regions {
		var found []Address
		if err := b.do(ctx, "ListAddresses", func(ctx context.Context) (err error) {
			found, err = b.cloud.ListAddresses(ctx, b.cfg.Token, region, contract.LabelManaged, owner)
			return err
		}); err != nil {
			return nil, err
		}
		for _, a := range found {
			replica, err := strconv.Atoi(a.Labels[contract.LabelReplica])
			if err != nil {
				if stop {
					break
				}
				if !list {
					continue
				}
				replica = 0
			}
			out = append(out, contract.Egress{Region: region, UID: a.Labels[contract.LabelUID], Replica: int32(replica), Owner: owner, IP: a.IP})
		}
	}
	return out, nil
}
