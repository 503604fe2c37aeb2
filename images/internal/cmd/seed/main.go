// Command seed writes a NoCloud seed ISO with images/nocloud, for scripts
// that boot the guest image by hand (the end-to-end test, a smoke boot).
//
//	go run ./internal/cmd/seed -user-data user-data -hostname web -o seed.iso [-network-config nc.yaml]
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/egress-proxies/egress-proxies-operator/images/nocloud"
)

func main() {
	userData := flag.String("user-data", "", "user-data file")
	networkConfig := flag.String("network-config", "", "network-config file (optional)")
	hostname := flag.String("hostname", "egress-proxy", "local-hostname")
	instanceID := flag.String("instance-id", "", "instance-id (default: the hostname)")
	out := flag.String("o", "seed.iso", "output file")
	flag.Parse()
	if err := run(*userData, *networkConfig, *hostname, *instanceID, *out); err != nil {
		fmt.Fprintln(os.Stderr, "seed:", err)
		os.Exit(1)
	}
}

func run(userData, networkConfig, hostname, instanceID, out string) error {
	s := nocloud.Seed{Hostname: hostname, InstanceID: instanceID}
	if s.InstanceID == "" {
		s.InstanceID = hostname
	}
	var err error
	if s.UserData, err = os.ReadFile(userData); err != nil {
		return err
	}
	if networkConfig != "" {
		if s.NetworkConfig, err = os.ReadFile(networkConfig); err != nil {
			return err
		}
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if _, err := s.WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
