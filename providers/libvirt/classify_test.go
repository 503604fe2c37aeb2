package libvirt

import (
	"context"
	"testing"

	"libvirt.org/go/libvirt"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/contract/contracttest"
)

// TestClassify classifies errors captured from libvirt itself: each is
// provoked on test:///default (libvirt 9.0's test driver, through the same
// client library and error path as every driver), or on a connection to a
// socket that does not exist. The quota row cannot be provoked there; it
// is the ENOSPC error TestClassifyQuotaOnRealDaemon captures from a real
// daemon, code, domain and text.
func TestClassify(t *testing.T) {
	const src = "test:///default (libvirt 9.0 test driver)"
	c, err := libvirt.NewConnect(testURI)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	_, noDomain := c.LookupDomainByName("no-such-domain")
	_, noPool := c.LookupStoragePoolByName("no-such-pool")
	_, noNetwork := c.LookupNetworkByName("no-such-network")
	_, badXML := c.DomainDefineXML("<domain")
	pool, err := c.LookupStoragePoolByName(testPool)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = pool.Free() }()
	_, noVol := pool.LookupStorageVolByName("no-such-volume")
	vol, err := createVolume(pool, "classify-probe.raw", "raw", 1)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = vol.Delete(0); _ = vol.Free() }()
	_, volExists := createVolume(pool, "classify-probe.raw", "raw", 1)
	st, err := c.NewStream(0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Free() }()
	noUpload := vol.Upload(st, 0, 1, 0)

	dom, err := c.DomainDefineXML(`<domain type='qemu'><name>classify-probe</name><memory unit='MiB'>256</memory><os><type>hvm</type></os></domain>`)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = dom.Undefine(); _ = dom.Free() }()
	_, domExists := c.DomainDefineXML(`<domain type='qemu'><name>classify-probe</name><uuid>11111111-2222-3333-4444-555555555555</uuid><memory unit='MiB'>256</memory><os><type>hvm</type></os></domain>`)
	notRunning := dom.Destroy()
	if err := dom.Create(); err != nil {
		t.Fatal(err)
	}
	alreadyRunning := dom.Create()
	_ = dom.Destroy()
	_, noSocket := libvirt.NewConnect("qemu:///system?socket=/nonexistent/libvirt-sock")
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	cancelledErr := run(cancelled, func() error { return nil })

	if !isExists(domExists) || !isExists(volExists) || !isInvalidState(notRunning) {
		t.Errorf("the race errors are not recognised: %v / %v / %v", domExists, volExists, notRunning)
	}
	contracttest.RunClassifyTable(t, classify, []contracttest.ClassifyCase{
		{Name: "ERR_NO_DOMAIN", Err: noDomain, Want: contract.ErrNotFound, Source: src + ": virDomainLookupByName"},
		{Name: "ERR_NO_STORAGE_VOL", Err: noVol, Want: contract.ErrNotFound, Source: src + ": virStorageVolLookupByName"},
		{Name: "ERR_NO_STORAGE_POOL", Err: noPool, Want: contract.ErrPermanent, Source: src + ": virStoragePoolLookupByName (a pool the config names is missing)"},
		{Name: "ERR_NO_NETWORK", Err: noNetwork, Want: contract.ErrPermanent, Source: src + ": virNetworkLookupByName"},
		{Name: "ERR_XML_DETAIL", Err: badXML, Want: contract.ErrPermanent, Source: src + ": virDomainDefineXML of malformed XML"},
		{Name: "ERR_NO_SUPPORT", Err: noUpload, Want: contract.ErrPermanent, Source: src + ": virStorageVolUpload, which the driver lacks"},
		{Name: "domain name taken", Err: domExists, Want: nil, Source: src + ": virDomainDefineXML, ERR_OPERATION_FAILED (a racing Create: resumed)"},
		{Name: "volume name taken", Err: volExists, Want: nil, Source: src + ": virStorageVolCreateXML, ERR_OPERATION_FAILED"},
		{Name: "ERR_OPERATION_INVALID", Err: notRunning, Want: nil, Source: src + ": virDomainDestroy of a domain not running"},
		{Name: "already running", Err: alreadyRunning, Want: nil, Source: src + ": virDomainCreate of a running domain, ERR_INTERNAL_ERROR"},
		{Name: "ERR_SYSTEM_ERROR no socket", Err: noSocket, Want: nil, Source: "virConnectOpen of qemu:///system?socket=/nonexistent/libvirt-sock (remote driver)"},
		{Name: "ENOSPC", Err: quotaError, Want: contract.ErrQuota, Source: "the text TestClassifyQuotaOnRealDaemon captures from a real libvirtd 9.0 (a full dir pool)"},
		{Name: "connection dropped mid-call", Err: lostConnection, Want: nil, Source: "libvirt 9.0 rpc/virnetsocket.c virNetSocketReadWire: EOF on the daemon's socket (the control's CutCall)"},
		{Name: "ERR_ACCESS_DENIED", Err: accessDenied, Want: contract.ErrPermanent, Source: "libvirt 9.0 access/viraccessmanager.c: the ACL driver refuses the identity (the control's RejectCredentials)"},
		{Name: "cancelled ctx", Err: cancelledErr, Want: nil, Source: "context package through run"},
	})
}

// TestClassifyQuotaOnRealDaemon captures a full pool from a real daemon: a
// fully allocated volume larger than the private daemon's 16 MiB tmpfs pool
// fails with ENOSPC.
func TestClassifyQuotaOnRealDaemon(t *testing.T) {
	l := realDaemon(t)
	if l.smallPool == "" {
		t.Skip("skipped: needs the private daemon's small pool (LIBVIRT_TEST_PRIVATE_DAEMON=1)")
	}
	c, err := libvirt.NewConnect(l.uri)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = c.Close() }()
	var full error
	_ = withPool(c, l.smallPool, func(pool *libvirt.StoragePool) error {
		vol, err := pool.StorageVolCreateXML(`<volume><name>egress-enospc-probe.raw</name><capacity unit='MiB'>64</capacity><allocation unit='MiB'>64</allocation><target><format type='raw'/></target></volume>`, 0)
		if err == nil {
			_ = vol.Delete(0)
			_ = vol.Free()
			t.Fatal("a 64 MiB volume fit into the 16 MiB pool")
		}
		full = err
		return nil
	})
	t.Logf("captured: %#v", full)
	contracttest.RunClassifyTable(t, classify, []contracttest.ClassifyCase{
		{Name: "pool full", Err: full, Want: contract.ErrQuota, Source: "a real libvirtd's dir pool on a 16 MiB tmpfs, virStorageVolCreateXML of a fully allocated 64 MiB volume"},
	})
}
