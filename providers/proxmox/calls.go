package proxmox

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	pve "github.com/luthermonson/go-proxmox"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// conn is what one call gets: the region's go-proxmox client, and for the
// upload the provider makes itself, the HTTP client, base URL and token.
type conn struct {
	api   *pve.Client
	http  *http.Client
	base  string
	token string
}

// call runs one API call against a region: bounded by the call timeout,
// its error classified, logged at the call tier. The otelhttp transport
// makes its child span.
func (p *Provider) call(ctx context.Context, region, name string, fn func(context.Context, conn) error) error {
	return p.callWithin(ctx, region, name, p.cfg.CallTimeout.Duration, fn)
}

func (p *Provider) callWithin(ctx context.Context, region, name string, budget time.Duration, fn func(context.Context, conn) error) error {
	ctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	start := time.Now()
	rc := p.regions[region]
	api, hc, token, err := rc.client()
	if err == nil {
		err = fn(ctx, conn{api: api, http: hc, base: rc.base(), token: token})
		if err != nil && ctx.Err() != nil {
			// The budget or the caller's ctx cut the call: say so, so
			// classify sees a context error, never a connection error.
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		err = classify(err)
	}
	logr.FromContextOrDiscard(ctx).V(contract.LogCall).Info("proxmox call", "call", name, "region", region,
		"duration", time.Since(start).Round(time.Millisecond), "class", contract.ClassOf(err))
	if err != nil {
		return fmt.Errorf("proxmox %s: %w", name, err)
	}
	return nil
}

func (rc *regionClient) base() string {
	return strings.TrimSuffix(rc.region.Endpoint, "/") + "/api2/json"
}

// vmPath is /nodes/{node}/qemu/{vmid}.
func vmPath(node string, vmid int) string {
	return "/nodes/" + url.PathEscape(node) + "/qemu/" + strconv.Itoa(vmid)
}

// newVM returns go-proxmox's handle on a VM without a call.
func newVM(c *pve.Client, node string, vmid int) *pve.VirtualMachine {
	vm := &pve.VirtualMachine{}
	vm.New(c, node, vmid)
	return vm
}

// resources lists the region's guests (GET /cluster/resources?type=vm):
// one call for the whole cluster; PVE cannot filter by tag on the server.
// The list holds LXC containers too (pve-manager PVE/API2/Cluster.pm
// resources: every guest of the vmlist, type qemu or lxc): what reads VMs
// skips them (isVM); only the choice of a free VMID counts them, as VMIDs
// are one space for both.
func (p *Provider) resources(ctx context.Context, region string) (pve.ClusterResources, error) {
	var rs pve.ClusterResources
	err := p.call(ctx, region, "ListVMs", func(ctx context.Context, c conn) error {
		return c.api.Get(ctx, "/cluster/resources?type=vm", &rs)
	})
	return rs, err
}

// isVM reports whether a listed guest is a QEMU VM, not a container.
func isVM(r *pve.ClusterResource) bool { return r != nil && r.Type == "qemu" }

// vmStatus is the part of status/current the provider reads.
type vmStatus struct {
	Name      string `json:"name"`
	Status    string `json:"status"`
	QMPStatus string `json:"qmpstatus"`
	Lock      string `json:"lock"`
	Tags      string `json:"tags"`
}

// vmInfo is one VM as read: its status and config.
type vmInfo struct {
	region string
	node   string
	vmid   int
	status vmStatus
	conf   map[string]any
	marks  marks
}

func (v vmInfo) confString(key string) string {
	switch x := v.conf[key].(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	}
	return ""
}

func (v vmInfo) lock() string {
	if v.status.Lock != "" {
		return v.status.Lock
	}
	return v.confString("lock")
}

func (v vmInfo) state(ip string) contract.State {
	return stateOf(vmState{status: v.status.Status, qmp: v.status.QMPStatus, lock: v.lock(), started: v.marks.started}, ip)
}

func (v vmInfo) name() string {
	if v.status.Name != "" {
		return v.status.Name
	}
	return v.confString("name")
}

// readVM reads status/current and the config, as go-proxmox's
// Node.VirtualMachine does, into the provider's own shapes.
func (p *Provider) readVM(ctx context.Context, region, node string, vmid int) (vmInfo, error) {
	v := vmInfo{region: region, node: node, vmid: vmid}
	err := p.call(ctx, region, "GetVM", func(ctx context.Context, c conn) error {
		if err := c.api.Get(ctx, vmPath(node, vmid)+"/status/current", &v.status); err != nil {
			return err
		}
		return c.api.Get(ctx, vmPath(node, vmid)+"/config", &v.conf)
	})
	v.marks = readMarks(v.confString("tags"), v.confString("description"))
	return v, err
}

// agentBudget bounds the agent call at least: PVE waits up to 3 s for
// guest-ping and 5 s for the command before it answers that the agent does
// not respond (qemu-server QemuServer/Agent.pm qga_check_running,
// QMPClient.pm cmd); a shorter callTimeout would cut that answer off.
const agentBudget = 10 * time.Second

// agentIPs asks the guest agent for the VM's routable IPv4 addresses; an
// agent that does not answer (yet) is no address, not an error (ip-source:
// discovered).
func (p *Provider) agentIPs(ctx context.Context, v vmInfo) ([]string, error) {
	var ifaces []*pve.AgentNetworkIface
	err := p.callWithin(ctx, v.region, "AgentNetworkInterfaces", max(p.cfg.CallTimeout.Duration, agentBudget), func(ctx context.Context, c conn) (err error) {
		ifaces, err = newVM(c.api, v.node, v.vmid).AgentGetNetworkIFaces(ctx)
		return err
	})
	if isNoAgent(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []agentIface
	for _, nic := range ifaces {
		a := agentIface{name: nic.Name}
		for _, addr := range nic.IPAddresses {
			if addr != nil {
				a.ips = append(a.ips, addr.IPAddress)
			}
		}
		out = append(out, a)
	}
	return agentIPv4(out), nil
}
