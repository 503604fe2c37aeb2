package devsim

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"

	"github.com/egress-proxies/egress-proxies-operator/contract"
	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
	"github.com/egress-proxies/egress-proxies-operator/providers/vsphere"
)

// Provider describes the vSphere provider entry for the simulated vCenter.
type Provider struct {
	// Name is the configured provider name.
	Name string
	// Server is the SDK URL the provider dials, and Cert its certificate.
	Server string
	Cert   *x509.Certificate
	// User and Password are written to credential files.
	User, Password string
	// Network, when set, is the zone's port group (the clone edits its NIC).
	Network string
	// Extra is YAML added to the entry (checkInterval, limits, …), each
	// line indented for it.
	Extra string
	// VSphere is YAML added to the entry's vsphere block (callTimeout, …),
	// each line indented for it.
	VSphere string
}

// WriteProvidersConfig writes the credentials, the server's certificate
// and a providers config with one vSphere provider for the simulated
// inventory into dir, and returns the config's path.
func WriteProvidersConfig(dir string, p Provider) (string, error) {
	files := map[string]string{
		"vsphere-username": p.User,
		"vsphere-password": p.Password,
		"vsphere-ca.pem":   string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Cert.Raw})),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			return "", err
		}
	}
	path := filepath.Join(dir, "providers.yaml")
	return path, os.WriteFile(path, fmt.Appendf(nil, `defaultAllowedClients: ["10.244.0.0/16"]
providers:
  - name: %s
    type: vsphere
%s    vsphere:
      server: %s
      usernameFile: %s
      passwordFile: %s
      caFile: %s
%s      regions:
        dc0:
          datacenter: %s
          folder: %s
          zones:
            c0: {resourcePool: %s, datastore: %s, network: "%s"}
      machineTypes: {small: {cpus: 1, memoryMiB: 1024}}
      images: {debian-12: %s}
`, p.Name, p.Extra, p.Server, filepath.Join(dir, "vsphere-username"), filepath.Join(dir, "vsphere-password"),
		filepath.Join(dir, "vsphere-ca.pem"), p.VSphere, Datacenter, Folder, ResourcePool, Datastore, p.Network, Template), 0o600)
}

// Registry holds the vSphere constructor, as operator/cmd/providers_vsphere.go
// registers it behind its build tag.
func Registry() providers.Registry {
	reg := providers.Registry{}
	reg.Register(providers.Typed(vsphere.Type, vsphere.Config.Validate,
		func(c vsphere.Config) (contract.Provider, error) { return vsphere.New(c) }))
	return reg
}
