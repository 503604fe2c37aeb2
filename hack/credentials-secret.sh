#!/usr/bin/env bash
# Prints the credentials Secret the operator's Deployment mounts
# (egress-proxies-provider-credentials in egress-proxies-system) at
# /etc/egress-proxies/credentials, from files, so no secret is typed on a
# command line:
#   hack/credentials-secret.sh vsphere-username=./user vsphere-password=./pass | kubectl apply -f -
# Each KEY=FILE becomes one file of the mount; the provider's block names
# them (e.g. usernameFile: /etc/egress-proxies/credentials/vsphere-username).
set -euo pipefail
namespace=${NAMESPACE:-egress-proxies-system}
name=${NAME:-egress-proxies-provider-credentials}
[ $# -gt 0 ] || { echo "usage: $0 KEY=FILE [KEY=FILE ...]" >&2; exit 2; }
printf 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n  namespace: %s\ntype: Opaque\ndata:\n' "$name" "$namespace"
for pair in "$@"; do
  key=${pair%%=*} file=${pair#*=}
  [[ "$key" =~ ^[-._a-zA-Z0-9]+$ ]] || { echo "key $key: letters, digits, '-', '_' and '.' only" >&2; exit 2; }
  [ -r "$file" ] || { echo "$file: not readable" >&2; exit 2; }
  printf '  %s: %s\n' "$key" "$(base64 -w0 < "$file")"
done
