// Package nocloud builds a cloud-init NoCloud seed: an ISO 9660 image with
// the volume label "cidata" holding user-data, meta-data and, optionally,
// network-config, written in process to an io.Writer (no genisoimage or
// cloud-localds on the host).
//
// # Limits
//
// The image is written by github.com/kdomanski/iso9660: a primary volume
// descriptor only — no Joliet, no Rock Ridge, no path tables — with the
// lowercase file names Linux reads as they are. Linux cloud-init reads it
// (verified in a booted Debian 12 guest); a strict reader that needs Joliet
// or path tables (Windows, cloudbase-init) may not. For such guests, build
// the seed with github.com/diskfs/go-diskfs, which writes Joliet and Rock
// Ridge, or deliver user-data through a channel that needs no ISO.
//
// Sizes: user-data up to MaxUserData, meta-data and network-config up to
// MaxDocument each. Larger inputs are refused before anything is written.
package nocloud

import (
	"bytes"
	"fmt"
	"io"
	"regexp"

	"github.com/kdomanski/iso9660"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// VolumeLabel is the label cloud-init's NoCloud datasource looks for.
const VolumeLabel = "cidata"

const (
	// MaxUserData bounds user-data: far above any proxy cloud-config, far
	// below what would make a seed upload slow.
	MaxUserData = 16 << 20
	// MaxDocument bounds meta-data and network-config.
	MaxDocument = 1 << 20
)

var (
	// instanceIDRE: cloud-init compares instance-id across boots; keep it to
	// characters every YAML reader and file name accepts.
	instanceIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	// hostnameRE is a DNS-1123 label.
	hostnameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
)

// Seed is the content of a NoCloud seed.
type Seed struct {
	// UserData is the user-data, written byte for byte.
	UserData []byte
	// InstanceID identifies the instance to cloud-init; a new ID makes
	// cloud-init run its per-instance modules again.
	InstanceID string
	// Hostname is meta-data's local-hostname.
	Hostname string
	// NetworkConfig, when set, is written as network-config byte for byte
	// (network config version 1 or 2).
	NetworkConfig []byte
}

// Validate checks the seed; errors are ErrPermanent naming the field and
// the value.
func (s Seed) Validate() error {
	switch {
	case len(s.UserData) > MaxUserData:
		return contract.InvalidField("userData", fmt.Sprintf("%d bytes", len(s.UserData)), fmt.Sprintf("at most %d bytes", MaxUserData))
	case !instanceIDRE.MatchString(s.InstanceID):
		return contract.InvalidField("instanceID", s.InstanceID, "letters, digits, '.', '_' and '-', at most 128, starting with a letter or digit")
	case !hostnameRE.MatchString(s.Hostname):
		return contract.InvalidField("hostname", s.Hostname, "must be a DNS-1123 label")
	case len(s.NetworkConfig) > MaxDocument:
		return contract.InvalidField("networkConfig", fmt.Sprintf("%d bytes", len(s.NetworkConfig)), fmt.Sprintf("at most %d bytes", MaxDocument))
	}
	return nil
}

// MetaData renders meta-data. The values are validated to need no YAML
// quoting.
func (s Seed) MetaData() []byte {
	return fmt.Appendf(nil, "instance-id: %s\nlocal-hostname: %s\n", s.InstanceID, s.Hostname)
}

// WriteTo validates s and writes the seed image to w.
func (s Seed) WriteTo(w io.Writer) (int64, error) {
	if err := s.Validate(); err != nil {
		return 0, err
	}
	iw, err := iso9660.NewWriter()
	if err != nil {
		return 0, fmt.Errorf("nocloud: %w", err)
	}
	// The writer stages files in a temporary directory.
	defer func() { _ = iw.Cleanup() }()
	files := []struct {
		name string
		data []byte
	}{{"user-data", s.UserData}, {"meta-data", s.MetaData()}}
	if s.NetworkConfig != nil {
		files = append(files, struct {
			name string
			data []byte
		}{"network-config", s.NetworkConfig})
	}
	for _, f := range files {
		if err := iw.AddFile(bytes.NewReader(f.data), f.name); err != nil {
			return 0, fmt.Errorf("nocloud: add %s: %w", f.name, err)
		}
	}
	cw := &countingWriter{w: w}
	if err := iw.WriteTo(cw, VolumeLabel); err != nil {
		return cw.n, fmt.Errorf("nocloud: write image: %w", err)
	}
	return cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
