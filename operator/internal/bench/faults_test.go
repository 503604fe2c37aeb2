package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// The fault classes the front injects into the operator's SOAP requests
// (BenchmarkFleetFaults, docs/performance.md), one class per run.
const (
	// faultTransient answers 503, as a vCenter restarting behind its
	// load balancer does: the request never reached vCenter.
	faultTransient = "transient"
	// faultQuota answers a CloneVM_Task with InsufficientResourcesFault
	// (the provider's classify.go maps it to ErrQuota); other requests
	// pass.
	faultQuota = "quota"
	// faultHang holds the request past the provider's call timeout, then
	// lets vCenter do it with nobody waiting for the answer: the work is
	// done, its answer lost.
	faultHang = "hang"
)

// injecting is the fault plan the front applies; nil injects nothing.
var injecting atomic.Pointer[faultPlan]

// faultPlan injects one class of fault into a share of the requests.
type faultPlan struct {
	class string
	rate  float64
	// hold is the longest a hung request is held (past the call timeout;
	// the provider gives up first).
	hold     time.Duration
	mu       sync.Mutex
	rnd      *rand.Rand
	injected atomic.Int64
}

func newFaultPlan(class string, rate float64, hold time.Duration) *faultPlan {
	// A fixed seed: runs draw the same sequence, faults differ only by
	// how the requests interleave.
	return &faultPlan{class: class, rate: rate, hold: hold, rnd: rand.New(rand.NewPCG(19, 300))}
}

// serve answers r with the plan's fault when the draw says so, and
// reports whether it did; otherwise r is left for forward.
func (p *faultPlan) serve(w http.ResponseWriter, r *http.Request, forward http.Handler) bool {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if p.class == faultQuota && !bytes.Contains(body, []byte("<CloneVM_Task")) {
		return false
	}
	p.mu.Lock()
	hit := p.rnd.Float64() < p.rate
	p.mu.Unlock()
	if !hit {
		return false
	}
	p.injected.Add(1)
	switch p.class {
	case faultTransient:
		http.Error(w, "injected: service unavailable", http.StatusServiceUnavailable)
	case faultQuota:
		w.Header().Set("Content-Type", "text/xml; charset=utf-8")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, insufficientResources)
	case faultHang:
		select {
		case <-r.Context().Done():
		case <-time.After(p.hold):
		}
		late := r.Clone(context.WithoutCancel(r.Context()))
		late.Body = io.NopCloser(bytes.NewReader(body))
		forward.ServeHTTP(discarded{header: http.Header{}}, late)
		// Never answer: the connection is cut, as a hung call's is.
		panic(http.ErrAbortHandler)
	}
	return true
}

// insufficientResources is a SOAP fault as vCenter sends it for a clone
// the cluster has no room for (the vSphere Web Services API's
// InsufficientResourcesFault, a subtype of VimFault).
const insufficientResources = `<?xml version="1.0" encoding="UTF-8"?>
<soapenv:Envelope xmlns:soapenc="http://schemas.xmlsoap.org/soap/encoding/" xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/" xmlns:xsd="http://www.w3.org/2001/XMLSchema" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">
<soapenv:Body>
<soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>Insufficient resources (injected)</faultstring><detail><InsufficientResourcesFaultFault xmlns="urn:vim25" xsi:type="InsufficientResourcesFault"></InsufficientResourcesFaultFault></detail></soapenv:Fault>
</soapenv:Body>
</soapenv:Envelope>`

// discarded is a ResponseWriter that drops the answer of a hung request.
type discarded struct{ header http.Header }

func (d discarded) Header() http.Header         { return d.header }
func (d discarded) Write(b []byte) (int, error) { return len(b), nil }
func (d discarded) WriteHeader(int)             {}

// faultCallTimeout is the provider's call timeout in the runs with faults
// (callTimeout in its config): a hung request holds a call slot this long.
const faultCallTimeout = 2 * time.Second

// goroutineSlack is how far above its settled count without faults the
// operator's goroutine count may settle after a run with faults: timers'
// and informers' own comings and goings, not one per Proxy or per fault.
const goroutineSlack = 10

// idleConnTimeout is how long an idle connection to vCenter stays open
// (providers/vsphere's transport: net/http's 90 s), with a margin: its two
// goroutines go with it.
const idleConnTimeout = 100 * time.Second

// BenchmarkFleetFaults makes and deletes a fleet through one operator
// process, first without faults, then once for each class in BENCH_FAULTS
// (comma-separated, of transient, quota, hang; default all three) while
// the front injects that class into BENCH_FAULT_RATE (default 0.2) of the
// operator's SOAP requests; BENCH_FLEET Proxies (default 300). A run with
// faults fails unless every Proxy becomes Ready, every one is deleted,
// and the operator's goroutines come back to within goroutineSlack of
// their count after the run without faults, once idle connections to
// vCenter have timed out.
//
// Metrics: create-ms, delete-ms, faults (injected), the provider calls
// that failed by class (errors-transient, errors-quota, …), goroutines
// (settled after the run) and settle-s, how long they took to settle.
func BenchmarkFleetFaults(b *testing.B) {
	sizes := envList(b, "BENCH_FLEET", "300", strconv.Atoi)
	classes := envList(b, "BENCH_FAULTS", "transient,quota,hang", func(s string) (string, error) {
		if !slices.Contains([]string{faultTransient, faultQuota, faultHang}, s) {
			return "", fmt.Errorf("unknown fault class %q (%s, %s, %s)", s, faultTransient, faultQuota, faultHang)
		}
		return s, nil
	})
	rate := envList(b, "BENCH_FAULT_RATE", "0.2", func(s string) (float64, error) {
		f, err := strconv.ParseFloat(s, 64)
		if err == nil && (f < 0 || f >= 1) {
			err = fmt.Errorf("want a share in [0, 1)")
		}
		return f, err
	})[0]
	for _, n := range sizes {
		op := startChild(b, time.Minute, faultsConfig, childQuotaBackoff+"=2s")
		var baseline float64
		for _, class := range append([]string{"none"}, classes...) {
			b.Run(fmt.Sprintf("proxies=%d,faults=%s", n, class), func(b *testing.B) {
				for b.Loop() {
					var plan *faultPlan
					if class != "none" {
						plan = newFaultPlan(class, rate, 3*faultCallTimeout)
					}
					baseline = fleetUnderFaults(b, op, n, plan, baseline)
				}
			})
		}
		op.stop()
	}
}

// fleetUnderFaults makes and deletes n Proxies while plan injects its
// faults (nil: none) and returns the goroutine count it settled at: after
// the idle connections' timeout without faults, within goroutineSlack of
// baseline (or failing after three minutes) with them.
func fleetUnderFaults(b *testing.B, op *child, n int, plan *faultPlan, baseline float64) float64 {
	ctx := context.Background()
	ns := fmt.Sprintf("faults-%d", time.Now().UnixNano())
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		b.Fatal(err)
	}
	defer deleteServices(b, ns)
	errorsBefore := op.callErrors(b)

	injecting.Store(plan)
	defer injecting.Store(nil)
	start := time.Now()
	createProxies(b, ns, n)
	waitProxies(b, ns, func(ps []v1alpha1.Proxy) bool { return countReady(ps) == n })
	created := time.Since(start)
	start = time.Now()
	if err := k8s.DeleteAllOf(ctx, &v1alpha1.Proxy{}, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	waitProxies(b, ns, func(ps []v1alpha1.Proxy) bool { return len(ps) == 0 })
	deleted := time.Since(start)
	injecting.Store(nil)
	errorsAfter := op.callErrors(b)

	settleStart := time.Now()
	var after float64
	if plan == nil {
		time.Sleep(idleConnTimeout)
		after = op.goroutines(b)
		op.settledStacks = op.stacks(b)
	} else {
		after = op.goroutines(b)
		for after > baseline+goroutineSlack && time.Since(settleStart) < 3*time.Minute {
			time.Sleep(5 * time.Second)
			after = op.goroutines(b)
		}
		if after > baseline+goroutineSlack {
			b.Errorf("%v goroutines 3 minutes after the fleet was deleted, %v after the run without faults: some are stuck; grown since:\n%s",
				after, baseline, grownStacks(op.settledStacks, op.stacks(b)))
		}
	}
	var injected int64
	if plan != nil {
		injected = plan.injected.Load()
	}
	b.ReportMetric(float64(created.Milliseconds()), "create-ms")
	b.ReportMetric(float64(deleted.Milliseconds()), "delete-ms")
	b.ReportMetric(float64(injected), "faults")
	for _, class := range []contract.Class{contract.ClassTransient, contract.ClassQuota, contract.ClassPermanent, contract.ClassNotFound} {
		b.ReportMetric(errorsAfter[string(class)]-errorsBefore[string(class)], "errors-"+strings.ToLower(string(class)))
	}
	b.ReportMetric(after, "goroutines")
	b.ReportMetric(time.Since(settleStart).Seconds(), "settle-s")
	return after
}
