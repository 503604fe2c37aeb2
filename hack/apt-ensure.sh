#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are not
# installed yet, with no service started: Debian starts a package's
# service from its postinst unless policy-rc.d says no, and a root libvirtd
# (with its `default` network) must never run on these machines. CI
# machines have a policy-rc.d that exits 101, kept as it is; elsewhere one
# is put in place for the install and removed after it.
#   hack/apt-ensure.sh PACKAGE...       # as root when something is missing
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
  echo "apt-ensure: missing Debian packages ${missing[*]}; run as root or install them" >&2
  exit 1
fi
echo "apt-ensure: installing ${missing[*]}" >&2

policy=/usr/sbin/policy-rc.d
if [ ! -x "$policy" ] || { "$policy" libvirtd start >/dev/null 2>&1; [ $? -ne 101 ]; }; then
  [ -e "$policy" ] && mv "$policy" "$policy.apt-ensure-saved"
  printf '#!/bin/sh\nexit 101\n' > "$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"; if [ -e "$policy.apt-ensure-saved" ]; then mv "$policy.apt-ensure-saved" "$policy"; fi' EXIT
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
