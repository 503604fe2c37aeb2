package proxy

import (
	"context"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest/memprovider"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// takeName replaces the VM name holds, while the operator is down, with
// another install's VM of the same name (the same providerID): a name or
// VMID the backend reused.
func takeName(t *testing.T, cloud *memprovider.Cloud, ctl memprovider.Control, name string) string {
	t.Helper()
	if err := cloud.DeleteVM(context.Background(), sharedToken, "r1", name); err != nil {
		t.Fatal(err)
	}
	return markedVM(t, cloud, ctl, name, anotherOwner, anotherUID)
}

// notOwnedSaid reports whether the Proxy's Ready condition is
// InstanceNotOwned naming the instance and both UIDs.
func notOwnedSaid(p *v1alpha1.Proxy, instance string) bool {
	c := readyCondition(p)
	return c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonInstanceNotOwned &&
		strings.Contains(c.Message, instance) && strings.Contains(c.Message, anotherUID) && strings.Contains(c.Message, string(p.UID))
}

// The providerID a Proxy recorded now names another Proxy's VM: the
// operator neither serves it, nor records its address, nor deletes it, and
// says so; deleting the Proxy leaves that VM alone.
func TestInstanceOfAnotherProxyIsNeitherServedNorDeleted(t *testing.T) {
	ctx := context.Background()
	cloud, ctl := newSharedCloud()
	c := startCluster(t)
	in := startInstall(t, c, cloud, labOnly, nil)
	p := proxyOn(t, c, "egress", "lab")
	bootOn(t, c, ctl, p, current)
	was := readyOn(t, c, p).Status.Instance
	in.stop()

	foreign := takeName(t, cloud, ctl, was.Name)
	in = startInstall(t, c, cloud, labOnly, nil)
	eventually(t, "InstanceNotOwned names the instance and both UIDs", func() bool { return notOwnedSaid(getOn(t, c, p), was.Name) })
	if got := getOn(t, c, p).Status.Instance; got.IP != was.IP || got.ProviderID != was.ProviderID {
		t.Errorf("the status took the other Proxy's VM in: %+v, was %+v", got, was)
	}
	eventually(t, "an InstanceNotOwned event", func() bool {
		return slices.ContainsFunc(eventsOn(t, c, p), func(e string) bool {
			return strings.HasPrefix(e, v1alpha1.ReasonInstanceNotOwned+": Get returned instance "+was.Name)
		})
	})
	if _, ok := vmOf(t, in.entry(t, "lab"), foreign); !ok {
		t.Fatalf("the other Proxy's VM %s was deleted", foreign)
	}

	if err := c.client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Proxy is gone", func() bool { return getOn(t, c, p) == nil })
	if inst, ok := vmOf(t, in.entry(t, "lab"), foreign); !ok || inst.UID != anotherUID {
		t.Errorf("deleting the Proxy deleted the other Proxy's VM %s", foreign)
	}
}

// A replaced instance is read back before it is deleted: when its
// providerID names another Proxy's VM by then, that VM stays.
func TestRetireLeavesAnotherProxysInstance(t *testing.T) {
	ctx := context.Background()
	cloud, ctl := newSharedCloud()
	c := startCluster(t)
	in := startInstall(t, c, cloud, labOnly, nil)
	p := proxyOn(t, c, "egress", "lab")
	bootOn(t, c, ctl, p, current)
	old := readyOn(t, c, p).Status.Instance
	changed := getOn(t, c, p)
	changed.Spec.AllowedClients = []v1alpha1.CIDR{"10.1.0.0/16"}
	if err := c.client.Update(ctx, changed); err != nil {
		t.Fatal(err)
	}
	var next string
	eventually(t, "the replacement is created", func() bool {
		r := getOn(t, c, p).Status.Replacement
		if r != nil && r.ProviderID != "" {
			next = r.ProviderID
		}
		return next != ""
	})
	in.stop()

	foreign := takeName(t, cloud, ctl, old.Name)
	if err := ctl.ReportIP(ctx, next, "192.0.2.250"); err != nil {
		t.Fatal(err)
	}
	in = startInstall(t, c, cloud, labOnly, nil)
	eventually(t, "the replacement serves", func() bool {
		got := getOn(t, c, p)
		return got.Status.Phase == v1alpha1.PhaseReady && got.Status.Instance.ProviderID == next
	})
	eventually(t, "an event says the replaced instance is not deleted", func() bool {
		return slices.ContainsFunc(eventsOn(t, c, p), func(e string) bool {
			return strings.HasPrefix(e, v1alpha1.ReasonInstanceNotOwned+": not deleting instance "+old.Name) && strings.Contains(e, anotherUID)
		})
	})
	if inst, ok := vmOf(t, in.entry(t, "lab"), foreign); !ok || inst.UID != anotherUID {
		t.Errorf("the other Proxy's VM %s was deleted as the replaced instance", foreign)
	}
}

// foreignCreate is a provider that breaks the contract: its Create hands
// back an instance marked for another Proxy.
type foreignCreate struct{ contract.Provider }

func (p foreignCreate) Create(ctx context.Context, req contract.CreateRequest) (contract.Instance, error) {
	inst, err := p.Provider.Create(ctx, req)
	inst.UID = anotherUID
	return inst, err
}

// An instance Create returns with another Proxy's UID is not recorded, nor
// served, nor deleted.
func TestCreatedInstanceOfAnotherProxyIsNotRecorded(t *testing.T) {
	cloud, _ := newSharedCloud()
	c := startCluster(t)
	in := startInstall(t, c, cloud, labOnly, func(e *providers.Entry) contract.Provider { return foreignCreate{e.Provider} })
	p := proxyOn(t, c, "egress", "lab")
	var name string
	eventually(t, "InstanceNotOwned names the instance and both UIDs", func() bool {
		got := getOn(t, c, p)
		if got.Status.Instance != nil {
			name = got.Status.Instance.Name
		}
		return name != "" && notOwnedSaid(got, name) && strings.Contains(readyCondition(got).Message, "Create returned instance")
	})
	if ref := getOn(t, c, p).Status.Instance; ref.ProviderID != "" {
		t.Errorf("the instance was recorded: %+v", ref)
	}
	made, err := in.entry(t, "lab").Provider.ListByTag(context.Background(), contract.LabelUID, string(p.UID))
	if err != nil || len(made) != 1 {
		t.Errorf("the VM Create made: %+v, %v; want it left in place", made, err)
	}
}

// ignoresUIDFilter is a provider that breaks the contract: a list by UID
// returns every instance of its owner.
type ignoresUIDFilter struct {
	contract.Provider
	owner string
}

func (p ignoresUIDFilter) ListByTag(ctx context.Context, key, value string) ([]contract.Instance, error) {
	if key == contract.LabelUID {
		return p.Provider.ListByTag(ctx, contract.LabelManaged, p.owner)
	}
	return p.Provider.ListByTag(ctx, key, value)
}

// The finalizer deletes only the instances carrying its Proxy's UID, even
// when the provider lists others, and releases the Proxy when those are
// gone.
func TestFinalizerDeletesOnlyItsProxysInstances(t *testing.T) {
	ctx := context.Background()
	cloud, ctl := newSharedCloud()
	c := startCluster(t)
	in := startInstall(t, c, cloud, labOnly, func(e *providers.Entry) contract.Provider { return ignoresUIDFilter{e.Provider, e.Owner} })
	p, q := proxyOn(t, c, "egress", "lab"), proxyOn(t, c, "other", "lab")
	mine, theirs := bootOn(t, c, ctl, p, current), bootOn(t, c, ctl, q, current)
	readyOn(t, c, p)
	readyOn(t, c, q)

	if err := c.client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Proxy is gone", func() bool { return getOn(t, c, p) == nil })
	if _, ok := vmOf(t, in.entry(t, "lab"), mine); ok {
		t.Errorf("the deleted Proxy's VM %s is still there", mine)
	}
	if _, ok := vmOf(t, in.entry(t, "lab"), theirs); !ok {
		t.Errorf("deleting one Proxy deleted the other's VM %s", theirs)
	}
	if n := logLines("not deleting it", `"providerID"="`+theirs+`"`); n == 0 {
		t.Error("skipping the other Proxy's instance was not logged")
	}
}
