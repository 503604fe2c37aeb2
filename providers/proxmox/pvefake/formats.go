package pvefake

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/egress-proxies/egress-proxies-operator/providers/proxmox/pvefake/internal/facts"
)

// The named formats the fake checks, each ported from the Perl that
// registers it (PVE::JSONSchema::register_format). A format returns the
// text its verifier dies with ("" when valid), which check_prop prefixes
// with "invalid format - ".
var formats = map[string]func(string) string{
	// pve-common src/PVE/JSONSchema.pm pve_verify_vmid.
	"pve-vmid": reFormat(`^[1-9][0-9]{2,8}$`, "value does not look like a valid VM ID\n"),
	// pve-common src/PVE/JSONSchema.pm pve_verify_node_name.
	"pve-node": reFormat(`^([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`, "value does not look like a valid node name\n"),
	// pve-common src/PVE/JSONSchema.pm parse_storage_id → parse_id.
	"pve-storage-id": func(v string) string { return parseID(v, "storage") },
	// pve-common src/PVE/JSONSchema.pm pve_verify_dns_name.
	"dns-name": func(v string) string {
		if !dnsNameRE.MatchString(v) {
			return "value does not look like a valid DNS name\n"
		}
		return ""
	},
	// pve-common src/PVE/JSONSchema.pm pve_verify_tag ($PVE_TAG_RE).
	"pve-tag": reFormat(`(?i)^[a-z0-9_][a-z0-9_\-+.]*$`, "invalid characters in tag\n"),
	// pve-common src/PVE/JSONSchema.pm pve_verify_configid ($CONFIGID_RE).
	"pve-configid": func(v string) string {
		if !configIDRE.MatchString(v) {
			return fmt.Sprintf("invalid configuration ID '%s'\n", v)
		}
		return ""
	},
	// pve-common src/PVE/JSONSchema.pm pve_verify_disk_size → parse_size.
	"disk-size": func(v string) string {
		if !sizeRE.MatchString(v) {
			return fmt.Sprintf("value does not look like a valid disk size: %s\n", v)
		}
		return ""
	},
	// pve-common src/PVE/JSONSchema.pm parse_bridge_id.
	"pve-bridge-id": func(v string) string {
		if !bridgeRE.MatchString(v) {
			return fmt.Sprintf("invalid bridge ID '%s'\n", v)
		}
		return ""
	},
	// pve-common src/PVE/JSONSchema.pm pve_verify_mac_addr.
	"mac-addr": reFormat(`(?i)^[a-f0-9][02468ace](?::[a-f0-9]{2}){5}$`, "value does not look like a valid unicast MAC address\n"),
	// pve-storage src/PVE/Storage/Plugin.pm parse_volume_id.
	"pve-volume-id": parseVolumeID,
	// qemu-server src/PVE/QemuServer.pm verify_volume_id_or_qm_path and
	// verify_volume_id_or_absolute_path.
	"pve-volume-id-or-qm-path": func(v string) string {
		if v == "none" || v == "cdrom" || strings.HasPrefix(v, "/") {
			return ""
		}
		return parseVolumeID(v)
	},
	"pve-volume-id-or-absolute-path": func(v string) string {
		if strings.HasPrefix(v, "/") {
			return ""
		}
		return parseVolumeID(v)
	},
	// pve-access-control src/PVE/AccessControl.pm verify_poolname.
	"pve-poolid": func(v string) string {
		if len(strings.Split(v, "/")) > 3 {
			return fmt.Sprintf("pool name '%s' nested too deeply (max levels = 3)\n", v)
		}
		if !poolRE.MatchString(v) {
			return fmt.Sprintf("pool name '%s' contains invalid characters\n", v)
		}
		return ""
	},
	// pve-common src/PVE/JSONSchema.pm pve_verify_ipv4, pve_verify_ipv6
	// ($IPV4RE, $IPV6RE of src/PVE/ParseUtils.pm, formerly Tools.pm).
	"ipv4": reFormat(`^(?:`+ipv4RE+`)$`, "value does not look like a valid IPv4 address\n"),
	"ipv6": reFormat(`^(?:`+ipv6RE+`)$`, "value does not look like a valid IPv6 address\n"),
	// pve-common src/PVE/JSONSchema.pm pve_verify_ipv4_config: dhcp,
	// manual, or pve_verify_cidrv4 (an IPv4 address and a prefix length
	// of 8 to 32).
	"pve-ipv4-config": func(v string) string {
		if v == "dhcp" || v == "manual" || cidrOK(cidrv4RE, v, 32) {
			return ""
		}
		return "value does not look like a valid ipv4 network configuration\n"
	},
	// pve-common src/PVE/JSONSchema.pm pve_verify_ipv6_config: auto, dhcp,
	// manual, or pve_verify_cidrv6 (a prefix length of 8 to 128).
	"pve-ipv6-config": func(v string) string {
		if v == "auto" || v == "dhcp" || v == "manual" || cidrOK(cidrv6RE, v, 128) {
			return ""
		}
		return "value does not look like a valid ipv6 network configuration\n"
	},
	// pve-common src/PVE/JSONSchema.pm pve_verify_address: an IP address
	// or a DNS name (nameserver is address-list).
	"address": func(v string) string {
		if ipRE.MatchString(v) || dnsNameRE.MatchString(v) {
			return ""
		}
		return fmt.Sprintf("value does not look like a valid address: %s\n", v)
	},
	// pve-storage src/PVE/Storage/Plugin.pm verify_content: the content
	// types of a dir storage (valid_content_types('dir')) and import.
	"pve-storage-content": func(v string) string {
		switch v {
		case "images", "rootdir", "vztmpl", "iso", "backup", "snippets", "import":
			return ""
		}
		return fmt.Sprintf("invalid content type '%s'\n", v)
	},
}

// uncheckedFormats are named formats the pinned schema's endpoints use
// that the fake accepts without checking: no parameter the provider or the
// tests send reaches them. TestEveryFormatIsCheckedOrListed keeps this
// list and the schema in step.
var uncheckedFormats = map[string]bool{
	"CIDR": true, "pve-cpuset": true, "pve-hotplug-features": true,
	"pve-qemu-sev-fmt": true, "pve-qemu-tdx-fmt": true, "pve-qm-boot": true, "pve-qm-bootdisk": true,
	"pve-qm-cicustom": true, "pve-qm-hostpci": true, "pve-qm-ide": true,
	"pve-qm-rng": true, "pve-qm-smbios1": true, "pve-qm-watchdog": true, "pve-startup-order": true,
	"pve-task-status-type": true, "pve-vm-cpu-conf": true, "storage-pair": true, "urlencoded": true,
}

// hashFormats are the named formats registered as a hash of keys (a
// property string) whose keys the published schema does not carry: the
// API viewer names the format, so its keys are ported from the Perl that
// registers it and checked as parse_property_string checks them.
var hashFormats = map[string]map[string]*facts.Param{
	// qemu-server src/PVE/QemuServer/Network.pm $ipconfig_fmt (9.x;
	// src/PVE/QemuServer.pm in 8.4, the same keys): cloud-init's
	// ipconfig[n], "ip=<CIDR>,gw=<IPv4>,ip6=<CIDR>,gw6=<IPv6>", each
	// gateway requiring its address. No default key.
	"pve-qm-ipconfig": {
		"ip":  {Type: "string", Format: "pve-ipv4-config", Optional: true, Default: "dhcp"},
		"gw":  {Type: "string", Format: "ipv4", Optional: true, Requires: "ip"},
		"ip6": {Type: "string", Format: "pve-ipv6-config", Optional: true, Default: "dhcp"},
		"gw6": {Type: "string", Format: "ipv6", Optional: true, Requires: "ip6"},
	},
}

// $IPV4RE and $IPV6RE, pve-common src/PVE/ParseUtils.pm, as written there.
const (
	ipv4Octet = `(?:25[0-5]|(?:2[0-4]|1[0-9]|[1-9])?[0-9])`
	ipv4RE    = `(?:(?:` + ipv4Octet + `\.){3}` + ipv4Octet + `)`
	ipv6H16   = `(?:[0-9a-fA-F]{1,4})`
	ipv6LS32  = `(?:(?:` + ipv4RE + `|` + ipv6H16 + `:` + ipv6H16 + `))`
	ipv6RE    = `(?:` +
		`(?:(?:` + `(?:` + ipv6H16 + `:){6})` + ipv6LS32 + `)|` +
		`(?:(?:` + `::(?:` + ipv6H16 + `:){5})` + ipv6LS32 + `)|` +
		`(?:(?:(?:` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){4})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,1}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){3})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,2}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){2})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,3}` + ipv6H16 + `)?::(?:` + ipv6H16 + `:){1})` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,4}` + ipv6H16 + `)?::` + `)` + ipv6LS32 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,5}` + ipv6H16 + `)?::` + `)` + ipv6H16 + `)|` +
		`(?:(?:(?:(?:` + ipv6H16 + `:){0,6}` + ipv6H16 + `)?::` + `)))`
)

var (
	ipRE     = regexp.MustCompile(`^(?:(?:` + ipv4RE + `)|(?:` + ipv6RE + `))$`)
	cidrv4RE = regexp.MustCompile(`^(?:` + ipv4RE + `)(?:/(\d+))$`)
	cidrv6RE = regexp.MustCompile(`^(?:` + ipv6RE + `)(?:/(\d+))$`)
	// dnsNameRE is pve_verify_dns_name's.
	dnsNameRE = regexp.MustCompile(`^(([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`)
)

// cidrOK is pve_verify_cidrv4/v6: the address, then a prefix length
// above 7 and at most maxBits.
func cidrOK(re *regexp.Regexp, v string, maxBits int) bool {
	m := re.FindStringSubmatch(v)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[1])
	return err == nil && n > 7 && n <= maxBits
}

var (
	configIDRE = regexp.MustCompile(`(?i)^[a-z][a-z0-9_-]+$`)
	sizeRE     = regexp.MustCompile(`^(\d+(\.\d+)?)([KMGT](?:iB)?)?$`)
	bridgeRE   = regexp.MustCompile(`^[-_.\w\d]+$`)
	poolRE     = regexp.MustCompile(`^[A-Za-z0-9.\-_]+(?:/[A-Za-z0-9.\-_]+){0,2}$`)
	volumeRE   = regexp.MustCompile(`(?i)^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$`)
	idRE       = regexp.MustCompile(`(?i)^[a-z][a-z0-9\-_.]*[a-z0-9]$`)
)

func reFormat(re, msg string) func(string) string {
	r := regexp.MustCompile(re)
	return func(v string) string {
		if !r.MatchString(v) {
			return msg
		}
		return ""
	}
}

// parseID is pve-common src/PVE/JSONSchema.pm parse_id.
func parseID(v, typ string) string {
	if len(v) < 2 {
		return fmt.Sprintf("%s ID '%s' cannot be shorter than 2 characters\n", typ, v)
	}
	if !idRE.MatchString(v) {
		return fmt.Sprintf("%s ID '%s' contains illegal characters\n", typ, v)
	}
	return ""
}

func parseVolumeID(v string) string {
	if !volumeRE.MatchString(v) {
		return fmt.Sprintf("unable to parse volume ID '%s'\n", v)
	}
	return ""
}

// CheckFormat reports why PVE's named format (pve-node, pve-storage-id,
// pve-bridge-id, pve-poolid, dns-name, …) refuses v, "" when it accepts
// it: the provider's config validation is held to it, so a value the
// provider accepts is never one PVE refuses at the first call.
func CheckFormat(format, v string) string { return checkFormat(format, v) }

// checkFormat is JSONSchema.pm check_format for a named format: "-list"
// checks each item of PVE::Tools::split_list (an empty list is allowed),
// "-opt" checks a non-empty value. A format neither checked nor listed in
// uncheckedFormats is accepted too (the test catches it).
func checkFormat(format, v string) string {
	name, kind := format, ""
	if n, ok := strings.CutSuffix(format, "-list"); ok {
		name, kind = n, "list"
	} else if n, ok := strings.CutSuffix(format, "-opt"); ok {
		name, kind = n, "opt"
	}
	check := formats[name]
	if check == nil {
		return ""
	}
	switch kind {
	case "list":
		for _, item := range splitList(v) {
			if err := check(item); err != "" {
				return err
			}
		}
		return ""
	case "opt":
		if v == "" {
			return ""
		}
	}
	return check(v)
}

// splitList is pve-common src/PVE/ParseUtils.pm split_list: NUL-separated
// if it holds a NUL, else on commas, semicolons and white space.
func splitList(v string) []string {
	if strings.Contains(v, "\x00") {
		return strings.Split(v, "\x00")
	}
	return strings.Fields(strings.NewReplacer(",", " ", ";", " ").Replace(v))
}
