package libvirt

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"libvirt.org/go/libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TestCheckerDomainType: on the test driver, whose capabilities offer
// only domain type "test", an explicit kvm is a Checker failure naming
// the field and value (the operator shows it in ProviderHealth), while
// the default (auto) passes and says new domains get qemu.
func TestCheckerDomainType(t *testing.T) {
	b := newTestBackend(t)
	find := func(results []contract.CheckResult) contract.CheckResult {
		t.Helper()
		for _, r := range results {
			if r.Target == "region/"+testRegion+"/domainType" {
				return r
			}
		}
		t.Fatalf("no region/%s/domainType target in %+v", testRegion, results)
		return contract.CheckResult{}
	}
	kvm := b.cfg
	kvm.DomainType = "kvm"
	p, err := New(kvm)
	if err != nil {
		t.Fatal(err)
	}
	p.hooks = b.provider(t).hooks
	r := find(p.Check(context.Background()))
	if r.OK || r.Reason != contract.ReasonMisconfigured || !strings.Contains(r.Message, `domainType "kvm"`) {
		t.Errorf("explicit kvm on a host without it: %+v, want Misconfigured naming domainType \"kvm\"", r)
	}
	r = find(b.provider(t).Check(context.Background()))
	if !r.OK || r.Details["domainType"] != "qemu" || r.Details["kvmOffered"] != "false" {
		t.Errorf("the default on a host without KVM: %+v, want OK, domainType qemu", r)
	}
}

// TestCapsOfferKVM reads the capabilities of a host with KVM (libvirt
// 9.0's QEMU driver on this CI machine, trimmed) and of the test driver.
func TestCapsOfferKVM(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      bool
	}{
		{"qemu driver with kvm", `<capabilities><host><cpu><arch>x86_64</arch></cpu></host>
<guest><os_type>hvm</os_type><arch name='i686'><domain type='qemu'/><domain type='kvm'/></arch></guest>
<guest><os_type>hvm</os_type><arch name='x86_64'><domain type='qemu'/><domain type='kvm'/></arch></guest></capabilities>`, true},
		{"qemu driver without kvm", `<capabilities><host><cpu><arch>x86_64</arch></cpu></host>
<guest><os_type>hvm</os_type><arch name='x86_64'><domain type='qemu'/></arch></guest></capabilities>`, false},
		{"kvm for another architecture only", `<capabilities><host><cpu><arch>x86_64</arch></cpu></host>
<guest><os_type>hvm</os_type><arch name='x86_64'><domain type='qemu'/></arch></guest>
<guest><os_type>hvm</os_type><arch name='aarch64'><domain type='kvm'/></arch></guest></capabilities>`, false},
	} {
		var caps libvirtxml.Caps
		if err := caps.Unmarshal(tc.doc); err != nil {
			t.Fatal(err)
		}
		if got := capsOfferKVM(caps); got != tc.want {
			t.Errorf("%s: offers KVM = %v, want %v", tc.name, got, tc.want)
		}
	}
	c, err := libvirt.NewConnect(testURI)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	if kvm, err := offersKVM(c); err != nil || kvm {
		t.Errorf("the test driver offers KVM = %v, %v; its capabilities list only type test", kvm, err)
	}
}

// TestAutoDomainTypeOnRealDaemon defines a domain with the default
// domainType on a real daemon: kvm where the host's capabilities offer
// it, qemu elsewhere. (Before, the default was qemu everywhere: a host
// with working KVM ran its proxies emulated.)
func TestAutoDomainTypeOnRealDaemon(t *testing.T) {
	l := realDaemon(t)
	imgPath := filepath.Join(t.TempDir(), "base.qcow2")
	if out, err := exec.CommandContext(t.Context(), "qemu-img", "create", "-q", "-f", "qcow2", imgPath, "16M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img: %v %s", err, out)
	}
	entry, _ := serveImage(t, imgPath)
	p := labProvider(t, l, entry)
	p.cfg.DomainType = Config{}.withDefaults().DomainType
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	doc, err := c.GetCapabilities()
	if err != nil {
		t.Fatal(err)
	}
	want := "qemu"
	if strings.Contains(doc, "<domain type='kvm'") {
		want = "kvm"
	}
	ctx := context.Background()
	req := contract.CreateRequest{Name: "egress-domtype-test", UID: "0e9d6c1a-7f3b-4d2e-9a5c-0000000000bb", Owner: testOwner, Port: 3128,
		Placement: contract.Placement{Region: "lab", MachineType: "small", Image: "proxy"}, CloudInit: []byte("#cloud-config\n")}
	pl, err := p.plan(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Delete(context.Background(), ids.Format("lab", req.Name)) })
	if _, err := p.build(ctx, pl, req); err != nil {
		t.Fatal(err)
	}
	dom, err := c.LookupDomainByName(req.Name)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dom.Free() }()
	xml, err := dom.GetXMLDesc(libvirt.DOMAIN_XML_INACTIVE)
	if err != nil {
		t.Fatal(err)
	}
	var def libvirtxml.Domain
	if err := def.Unmarshal(xml); err != nil {
		t.Fatal(err)
	}
	if def.Type != want {
		t.Errorf("the default domainType defined a %s domain on a host whose capabilities offer %s", def.Type, want)
	}
	t.Logf("host offers kvm: %v; domain type %s", want == "kvm", def.Type)
}
