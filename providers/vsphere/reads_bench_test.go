package vsphere

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// BenchmarkReads measures a ListByTag sweep and a Get over a folder of
// VSPHERE_BENCH_VMS VMs (default 1,000), each carrying the largest
// cloud-init (MaxCloudInit: 87 KiB of base64 in guestinfo.userdata), on
// vcsim in process behind the test's TLS front, in two modes:
//
//   - marks: the provider as it is, the marks read by key, the list paged
//     (listPage objects an answer);
//   - marks-one-answer: the same properties, the folder in one answer
//     (what the paging costs in calls and time);
//   - whole-extraConfig: the reader before, the whole of config.extraConfig
//     read and the folder in one answer.
//
// Besides ns/op it reports the SOAP calls per operation, the bytes of
// vcsim's answers per operation, and the largest single answer
// (hack/bench-vsphere-reads.sh prints them as a table). Figures, not
// assertions: the property-level check is TestReadsLeaveTheCloudInit.
func BenchmarkReads(b *testing.B) {
	n := 1000
	if s := os.Getenv("VSPHERE_BENCH_VMS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil || n < 1 {
			b.Fatalf("VSPHERE_BENCH_VMS=%q: want a positive number", s)
		}
	}
	v := startVcsim(b)
	cloudInit := bytes.Repeat([]byte("#cloud-config\n# bench\n"), MaxCloudInit/22)
	populate(b, v, n, cloudInit)
	// The default call budget, not the tests' 1 s: the reader before
	// reads 1,000 such VMs in one answer of some 88 MB, which takes more
	// than a second here (its ListByTag fails at 1 s).
	v.cfg.CallTimeout = contract.Duration{Duration: 30 * time.Second}
	p := v.provider(b)
	ctx := context.Background()
	getID := ids.Format("dc0", benchName(n/2))
	if _, err := p.Get(ctx, getID); err != nil { // log in and cache the folder
		b.Fatal(err)
	}

	whole := append([]string{"config.extraConfig"}, vmProps[:len(vmProps)-len(markKeys)]...)
	for _, mode := range []struct {
		name  string
		props []string
		page  int32
	}{
		{"marks", vmProps, listPage},
		{"marks-one-answer", vmProps, 0},
		{"whole-extraConfig", whole, 0},
	} {
		for _, op := range []struct {
			name string
			run  func() error
		}{
			{"ListByTag", func() error {
				found, err := p.ListByTag(ctx, contract.LabelManaged, testOwner)
				if err == nil && len(found) != n {
					err = fmt.Errorf("ListByTag found %d VMs, want %d", len(found), n)
				}
				return err
			}},
			{"Get", func() error {
				inst, err := p.Get(ctx, getID)
				if err == nil && inst.UID == "" {
					err = fmt.Errorf("Get read no UID: %+v", inst)
				}
				return err
			}},
		} {
			b.Run(mode.name+"/"+op.name, func(b *testing.B) {
				savedProps, savedPage := vmProps, listPage
				vmProps, listPage = mode.props, mode.page
				defer func() { vmProps, listPage = savedProps, savedPage }()
				var largest atomic.Int64
				var tap tapFunc = func(_ *http.Request, _, answer []byte) {
					for size := int64(len(answer)); ; {
						cur := largest.Load()
						if size <= cur || largest.CompareAndSwap(cur, size) {
							break
						}
					}
				}
				v.tap.Store(&tap)
				defer v.tap.Store(nil)
				calls, answered := v.calls.Load(), v.answered.Load()
				b.ResetTimer()
				for range b.N {
					if err := op.run(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64(v.calls.Load()-calls)/float64(b.N), "calls/op")
				b.ReportMetric(float64(v.answered.Load()-answered)/float64(b.N), "answer-B/op")
				b.ReportMetric(float64(largest.Load()), "largest-answer-B")
			})
		}
	}
}

func benchName(i int) string { return fmt.Sprintf("bench-%04d", i) }

// populate clones n VMs into dc0's folder as Create leaves them (the
// marks, the cloud-init, powered on), through the control's own session
// straight to vcsim, eight at a time.
func populate(b *testing.B, v *vcsim, n int, cloudInit []byte) {
	b.Helper()
	ctx := context.Background()
	region := v.cfg.Regions["dc0"]
	zone := region.Zones["c0"]
	f := find.NewFinder(v.client, true)
	tmpl, err := f.VirtualMachine(ctx, "/"+region.Datacenter+"/vm/"+templateName)
	if err != nil {
		b.Fatal(err)
	}
	folder, err := f.Folder(ctx, region.Folder)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := f.ResourcePool(ctx, zone.ResourcePool)
	if err != nil {
		b.Fatal(err)
	}
	poolRef := pool.Reference()
	var (
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
		first atomic.Pointer[error]
	)
	for i := range n {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			req := contract.CreateRequest{Name: benchName(i), UID: "uid-" + benchName(i), Owner: testOwner, CloudInit: cloudInit}
			spec := types.VirtualMachineCloneSpec{
				Location: types.VirtualMachineRelocateSpec{Pool: &poolRef},
				PowerOn:  true,
				Config:   &types.VirtualMachineConfigSpec{ExtraConfig: append(extraConfig(req), &types.OptionValue{Key: markStarted, Value: "true"})},
			}
			task, err := tmpl.Clone(ctx, folder, req.Name, spec)
			if err == nil {
				err = task.Wait(ctx)
			}
			if err != nil {
				first.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	if err := first.Load(); err != nil {
		b.Fatalf("populate %d VMs: %v", n, *err)
	}
}
