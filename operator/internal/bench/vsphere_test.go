package bench

import (
	"bufio"
	"context"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/session"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/controller"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/vsphere"
)

const (
	folder   = "/DC0/vm/egress-proxies"
	template = "DC0_C0_RP0_VM0"
	user     = "bench"
	password = "bench-password"
	// poll is how often both paths look for the guest's address.
	poll = 20 * time.Millisecond
	// workers is the bare path's concurrency: the operator's reconciles.
	workers = 3
)

var (
	k8s    client.Client
	direct *vim25.Client // the harness's own session, straight to vcsim
	front  *httptest.Server
	calls  atomic.Int64 // SOAP requests through the front: the paths' own
	ipSeq  atomic.Int32
)

func TestMain(m *testing.M) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		fmt.Fprintln(os.Stderr, "KUBEBUILDER_ASSETS is not set: run hack/bench-vsphere.sh")
		os.Exit(1)
	}
	logf.SetLogger(logr.Discard())
	env := &envtest.Environment{CRDDirectoryPaths: []string{filepath.Join("..", "..", "config", "crd", "bases")}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := run(m, cfg)
	_ = env.Stop()
	os.Exit(code)
}

func run(m *testing.M, cfg *rest.Config) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	model := simulator.VPX()
	if err := model.Create(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	model.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	server := model.Service.NewServer()
	defer server.Close()
	if err := prepare(ctx, server.URL); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	backend := &url.URL{Scheme: server.URL.Scheme, Host: server.URL.Host}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(backend) }}
	front = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	defer front.Close()
	go playGuests(ctx)

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(v1alpha1.AddToScheme(scheme))
	var err error
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	configPath, standIn, err := operatorConfig(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	registry := providers.Registry{}
	registry.Register(providers.Typed(vsphere.Type, vsphere.Config.Validate,
		func(c vsphere.Config) (contract.Provider, error) { return vsphere.New(c) }))
	go func() {
		err := app.Run(ctx, app.Options{ConfigPath: configPath, Registry: registry, MetricsAddr: "0", ProbeAddr: "0",
			RestConfig: func() (*rest.Config, error) { return cfg, nil },
			Prober: probe.HTTPProxy{Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, standIn)
			}},
			Timing: controller.Timing{Poll: poll, Resync: time.Second},
		})
		if err != nil && ctx.Err() == nil {
			fmt.Fprintln(os.Stderr, "operator:", err)
		}
	}()
	return m.Run()
}

func prepare(ctx context.Context, u *url.URL) error {
	c, err := vim25.NewClient(ctx, soap.NewClient(u, true))
	if err != nil {
		return err
	}
	if err := session.NewManager(c).Login(ctx, u.User); err != nil {
		return err
	}
	direct = c
	f := find.NewFinder(c, true)
	vm, err := f.VirtualMachine(ctx, "/DC0/vm/"+template)
	if err != nil {
		return err
	}
	if task, err := vm.PowerOff(ctx); err != nil || task.Wait(ctx) != nil {
		return fmt.Errorf("power off the template: %w", err)
	}
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return err
	}
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		return err
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return err
	}
	_, err = folders.VmFolder.CreateFolder(ctx, filepath.Base(folder))
	return err
}

// playGuests plays VMware Tools for both paths alike: a powered-on VM of
// the folder gets an address (TEST-NET-1, never contacted) within poll.
func playGuests(ctx context.Context) {
	for ctx.Err() == nil {
		time.Sleep(poll / 2)
		dir, err := find.NewFinder(direct, true).Folder(ctx, folder)
		if err != nil {
			continue
		}
		v, err := view.NewManager(direct).CreateContainerView(ctx, dir.Reference(), []string{"VirtualMachine"}, true)
		if err != nil {
			continue
		}
		var vms []mo.VirtualMachine
		_ = v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"runtime.powerState", "guest.ipAddress"}, &vms)
		_ = v.Destroy(ctx)
		for _, vm := range vms {
			if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || (vm.Guest != nil && vm.Guest.IpAddress != "") {
				continue
			}
			n := ipSeq.Add(1)
			task, err := object.NewVirtualMachine(direct, vm.Reference()).Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
				&types.OptionValue{Key: "SET.guest.ipAddress", Value: fmt.Sprintf("192.0.%d.%d", 2+n/250, 1+n%250)},
			}})
			if err == nil {
				_ = task.Wait(ctx)
			}
		}
	}
}

// operatorConfig writes the providers config for the front and starts the
// stand-in proxy the probe reaches.
func operatorConfig(ctx context.Context) (string, string, error) {
	dir, err := os.MkdirTemp("", "bench-vsphere")
	if err != nil {
		return "", "", err
	}
	write := func(name, data string) string {
		p := filepath.Join(dir, name)
		_ = os.WriteFile(p, []byte(data), 0o600)
		return p
	}
	ca := write("ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: front.Certificate().Raw})))
	cfg := write("providers.yaml", fmt.Sprintf(`
defaultAllowedClients: ["10.244.0.0/16"]
providers:
  - name: bench
    type: vsphere
    checkInterval: 1h
    limits: {qps: 1000, burst: 1000, concurrency: 16}
    vsphere:
      server: %s/sdk
      usernameFile: %s
      passwordFile: %s
      caFile: %s
      regions:
        dc0:
          datacenter: DC0
          folder: %s
          zones: {c0: {resourcePool: /DC0/host/DC0_C0/Resources, datastore: LocalDS_0}}
      machineTypes: {small: {cpus: 1, memoryMiB: 1024}}
      images: {debian-12: %s}
`, front.URL, write("user", user), write("pass", password), ca, folder, template))
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return "", "", err
	}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				_, _ = bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte("HTTP/1.0 400 Bad Request\r\n\r\n"))
			}()
		}
	}()
	return cfg, l.Addr().String(), nil
}
