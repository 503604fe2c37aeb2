package proxy

import (
	"fmt"

	"github.com/egress-proxies/egress-proxies-operator/images/cloudinit"
	"github.com/egress-proxies/egress-proxies-operator/operator/api/v1alpha1"
)

// renderDefault renders the default proxy cloud-init for a Proxy without
// its own: the Proxy's clients, or the operator's default client networks.
func renderDefault(proxy *v1alpha1.Proxy, defaultClients []string) ([]byte, error) {
	clients := make([]string, 0, len(proxy.Spec.AllowedClients))
	for _, c := range proxy.Spec.AllowedClients {
		clients = append(clients, string(c))
	}
	if len(clients) == 0 {
		clients = defaultClients
	}
	if len(clients) == 0 {
		return nil, fmt.Errorf("spec.allowedClients is empty and the operator has no defaultAllowedClients: a proxy is never open to the world")
	}
	return cloudinit.Render(cloudinit.Proxy{Hostname: proxy.Name, Port: proxy.Spec.Port, AllowedClients: clients})
}
