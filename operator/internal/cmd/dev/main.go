// Command dev is the operator's main job on a local default (make dev): a
// real kube-apiserver and etcd (built by hack/control-plane.sh), a
// simulated vCenter (vcsim, from the same govmomi as the vSphere
// provider) with a template prepared, the CRDs installed, the operator
// running with a providers config for that simulator, and a sample Proxy
// that goes to Ready with an address. It runs until interrupted and cleans
// up on exit.
//
// The sample Proxy takes its address from a sample AddressPool, so the
// table shows its address (ADDRESSES) before the VM exists and long before
// Ready. Two things a real vCenter's guest would do are played by this
// harness, not by the operator: VMware Tools reporting the VM's address
// (through vcsim's SET.guest.ipAddress: the Proxy's allocated address,
// status.addresses[0], from TEST-NET-1, never contacted), and the proxy
// answering on its port (a listener on loopback that the operator's probe
// is pointed at).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/app"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/devsim"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/probe"
)

const (
	user     = "dev-operator"
	password = "dev-password"
)

func main() {
	state := flag.String("state", ".dev", "directory for the kubeconfig, credentials and providers config")
	crds := flag.String("crds", "config/crd/bases", "directory of the CRDs")
	verbose := flag.Bool("v", false, "show the operator's logs")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, *state, *crds, *verbose)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, state, crds string, verbose bool) error {
	if err := os.MkdirAll(state, 0o700); err != nil {
		return err
	}
	state, _ = filepath.Abs(state)
	logf.SetLogger(funcr.New(func(prefix, args string) {
		if verbose {
			fmt.Fprintln(os.Stderr, prefix, args)
		}
	}, funcr.Options{}))

	say("starting kube-apiserver and etcd (KUBEBUILDER_ASSETS=%s)", os.Getenv("KUBEBUILDER_ASSETS"))
	env := &envtest.Environment{CRDDirectoryPaths: []string{crds}, ErrorIfCRDPathMissing: true}
	cfg, err := env.Start()
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer func() { say("stopping the control plane"); _ = env.Stop() }()
	kubeconfig, err := writeKubeconfig(env, state)
	if err != nil {
		return err
	}

	say("starting vcsim with template %s and folder %s", devsim.Template, devsim.Folder)
	sim, err := devsim.StartVcsim(ctx, user, password, true)
	if err != nil {
		return err
	}
	defer func() { say("stopping vcsim"); sim.Stop() }()

	standIn, err := devsim.StandInProxy(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = standIn.Close() }()
	server := *sim.Server.URL
	server.User = nil
	configPath, err := devsim.WriteProvidersConfig(state, devsim.Provider{
		Name: "dev-vsphere", Server: server.String(), Cert: sim.Server.Certificate(),
		User: user, Password: password, Network: devsim.Network, Extra: "    checkInterval: 10s\n",
	})
	if err != nil {
		return err
	}
	// The operator and the played guests outlive ctx (the interrupt) until
	// the Proxy is deleted, so its VM goes too.
	opCtx, stopOperator := context.WithCancel(context.WithoutCancel(ctx))
	defer stopOperator()
	k8s, err := newClient(cfg)
	if err != nil {
		return err
	}
	go sim.PlayGuestsAt(opCtx, time.Second, allocatedAddress(opCtx, k8s), func(vm, ip string) {
		say("guest %s reports %s (played by the dev harness)", vm, ip)
	})

	operatorDone := make(chan error, 1)
	go func() {
		operatorDone <- app.Run(opCtx, app.Options{
			ConfigPath: configPath, Registry: devsim.Registry(), MetricsAddr: "0", ProbeAddr: "0",
			RestConfig: func() (*rest.Config, error) { return cfg, nil },
			// The probe runs for real, against the stand-in on loopback.
			Prober: probe.HTTPProxy{Dial: devsim.Dialer(standIn)},
		})
	}()

	// The sample pool: TEST-NET-1 addresses, reported, never contacted.
	pool := &v1alpha1.AddressPool{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-egress"},
		Spec: v1alpha1.AddressPoolSpec{Provider: "dev-vsphere", Region: "dc0",
			Addresses: []v1alpha1.PoolAddresses{"192.0.2.10-192.0.2.19"}, Prefix: 24, Gateway: "192.0.2.1",
			DNS: []v1alpha1.IPv4{"192.0.2.53"}},
	}
	if err := k8s.Create(ctx, pool); err != nil {
		return fmt.Errorf("apply the sample AddressPool: %w", err)
	}
	proxy := &v1alpha1.Proxy{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-dev", Namespace: "default"},
		Spec: v1alpha1.ProxySpec{Provider: "dev-vsphere", Port: 3128, AddressPool: pool.Name,
			Placement:      v1alpha1.Placement{Region: "dc0", Zone: "c0", MachineType: "small", Image: "debian-12"},
			AllowedClients: []v1alpha1.CIDR{"10.244.0.0/16"}},
	}
	if err := k8s.Create(ctx, proxy); err != nil {
		return fmt.Errorf("apply the sample Proxy: %w", err)
	}
	say("applied AddressPool dev-egress and Proxy default/egress-dev using it; watching it (Ctrl-C to stop and clean up)")
	say("in another shell: KUBECONFIG=%s kubectl get proxies,proxyaddresses,addresspools,providerhealths -A", kubeconfig)
	watch(ctx, k8s, operatorDone)

	say("deleting the Proxy: its VM goes with it")
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	_ = k8s.Delete(cleanup, proxy)
	for cleanup.Err() == nil {
		if err := k8s.Get(cleanup, client.ObjectKeyFromObject(proxy), &v1alpha1.Proxy{}); client.IgnoreNotFound(err) == nil && err != nil {
			say("the Proxy and its VM are gone")
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stopOperator()
	select {
	case err := <-operatorDone:
		if err != nil {
			say("the operator stopped: %v", err)
		}
	case <-time.After(10 * time.Second):
	}
	return nil
}

// watch prints the Proxy table whenever it changes, like kubectl get -w.
func watch(ctx context.Context, k8s client.Client, operatorDone <-chan error) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tPROVIDER\tPHASE\tADDRESSES\tADDRESS\tAGE")
	_ = tw.Flush()
	last := ""
	for {
		var list v1alpha1.ProxyList
		if err := k8s.List(ctx, &list); err == nil {
			for _, p := range list.Items {
				row := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", p.Namespace, p.Name, p.Spec.Provider, p.Status.Phase,
					strings.Join(p.Status.Addresses, ","), p.Status.Address)
				if row != last {
					fmt.Fprintf(tw, "%s\t%s\n", row, time.Since(p.CreationTimestamp.Time).Round(time.Second))
					_ = tw.Flush()
					last = row
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case err := <-operatorDone:
			say("the operator stopped: %v", err)
			return
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func say(format string, args ...any) { fmt.Fprintf(os.Stderr, "dev: "+format+"\n", args...) }

func newClient(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: app.NewScheme()})
}

func writeKubeconfig(env *envtest.Environment, state string) (string, error) {
	admin, err := env.AddUser(envtest.User{Name: "dev-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return "", err
	}
	data, err := admin.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(state, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// allocatedAddress plays a guest that applied the static network it was
// given: a VM of a Proxy with an allocated address reports that address
// (status.addresses[0]); a VM of a Proxy without a pool reports the next
// free one; a VM whose Proxy is not found yet waits.
func allocatedAddress(ctx context.Context, k8s client.Client) func(vm string) (string, bool) {
	return func(vm string) (string, bool) {
		var list v1alpha1.ProxyList
		if err := k8s.List(ctx, &list); err != nil {
			return "", false
		}
		for _, p := range list.Items {
			for _, ref := range []*v1alpha1.InstanceRef{p.Status.Instance, p.Status.Replacement} {
				if ref == nil || ref.Name != vm {
					continue
				}
				if p.Spec.AddressPool == "" {
					return "", true
				}
				if len(p.Status.Addresses) == 0 {
					return "", false
				}
				return p.Status.Addresses[0], true
			}
		}
		return "", false
	}
}
