package pvefake

import (
	"fmt"
	"regexp"
	"strings"
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
	"dns-name": reFormat(`^(([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)\.)*([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?)$`, "value does not look like a valid DNS name\n"),
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
	"CIDR": true, "address": true, "pve-cpuset": true, "pve-hotplug-features": true,
	"pve-qemu-sev-fmt": true, "pve-qemu-tdx-fmt": true, "pve-qm-boot": true, "pve-qm-bootdisk": true,
	"pve-qm-cicustom": true, "pve-qm-hostpci": true, "pve-qm-ide": true, "pve-qm-ipconfig": true,
	"pve-qm-rng": true, "pve-qm-smbios1": true, "pve-qm-watchdog": true, "pve-startup-order": true,
	"pve-vm-cpu-conf": true, "storage-pair": true, "urlencoded": true,
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
