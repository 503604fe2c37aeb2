#!/usr/bin/env bash
# Installs the Debian packages named on the command line that are not
# installed yet, with no service started: Debian starts a package's
# service from its postinst unless policy-rc.d says no, and a root libvirtd
# (with its `default` network) must never run on these machines. CI
# machines have a policy-rc.d that exits 101, kept as it is; elsewhere one
# is put in place for the install and removed after it.
#   hack/apt-ensure.sh PACKAGE...       # as root when something is missing
#   hack/apt-ensure.sh @e2e @node       # the sets named in hack/packages.sh
#   hack/apt-ensure.sh @all             # every set (make warm, .ci/run)
set -euo pipefail
# shellcheck source=hack/packages.sh
. "$(dirname "$0")/packages.sh"

wanted=() preseeds=()
args=()
for arg in "$@"; do
  if [ "$arg" = @all ]; then
    for set in $ci_package_sets; do args+=("@$set"); done
  else
    args+=("$arg")
  fi
done
for arg in "${args[@]}"; do
  case $arg in
    @*)
      set_name=packages_${arg#@}
      [ -n "${!set_name+x}" ] || { echo "apt-ensure: no package set $arg in hack/packages.sh" >&2; exit 2; }
      read -r -a set_packages <<<"$(echo ${!set_name})"
      wanted+=("${set_packages[@]}")
      declare -F "preseed_${arg#@}" >/dev/null && preseeds+=("preseed_${arg#@}")
      ;;
    *) wanted+=("$arg") ;;
  esac
done

missing=()
for p in $(printf '%s\n' "${wanted[@]}" | sort -u); do
  [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" = "install ok installed" ] || missing+=("$p")
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
for preseed in "${preseeds[@]}"; do "$preseed" | debconf-set-selections; done
# make warm may be installing in the background while a lane asks: wait
# for dpkg's lock rather than fail on it.
apt-get -o DPkg::Lock::Timeout=900 update -qq
DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >&2
