#!/usr/bin/env bash
# Writes the node's certificates, keys and kubeconfigs into DIR, once per
# lane (a second run finds DIR/done and does nothing): one CA for serving
# and client certificates, the service-account signing key, and a client
# certificate per component whose name and group are what the apiserver's
# Node and RBAC authorizers grant to that component — no component but the
# admin (the lane's own kubectl) is in system:masters. EC P-256 keys: quick
# to make and accepted everywhere Kubernetes takes a key.
#   hack/e2e/node/certs.sh DIR NODE_NAME NODE_IP API_SERVICE_IP
set -euo pipefail
dir=$1 node=$2 node_ip=$3 api_ip=$4
[ -f "$dir/done" ] && exit 0
mkdir -p "$dir"
cd "$dir"
days=7

key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key" 2>/dev/null; }
openssl_req() { openssl req -new -key "$1.key" -subj "$2"; }

key ca
openssl req -x509 -new -key ca.key -subj "/CN=egress-e2e-ca" -days $days -out ca.crt \
  -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign"

# cert NAME SUBJECT USAGE [SAN]: NAME.crt signed by the CA.
cert() {
  local name=$1 subject=$2 usage=$3 san=${4:-}
  key "$name"
  {
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [ -n "$san" ] && echo "subjectAltName=$san"
  } > "$name.ext"
  openssl_req "$name" "$subject" |
    openssl x509 -req -CA ca.crt -CAkey ca.key -CAcreateserial -days $days -extfile "$name.ext" -out "$name.crt" 2>/dev/null
  rm "$name.ext"
}

# Pods reach the apiserver as kubernetes.default.svc (the Service's
# address); the lane reaches it on the node address.
cert apiserver "/CN=kube-apiserver" serverAuth \
  "DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,IP:$api_ip,IP:$node_ip,IP:127.0.0.1"
# The apiserver's client certificate towards the kubelet (logs, exec):
# the kubelet asks the apiserver whether this user may, and RBAC's
# system:kubelet-api-admin says yes (bound in node-up.sh).
cert apiserver-kubelet-client "/CN=kube-apiserver-kubelet-client" clientAuth
cert admin "/O=system:masters/CN=egress-e2e-admin" clientAuth
# The names the default RBAC and the Node authorizer know.
cert kubelet "/O=system:nodes/CN=system:node:$node" clientAuth
cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
cert kube-proxy "/CN=system:kube-proxy" clientAuth
# The kubelet's serving certificate, so the apiserver can verify it.
cert kubelet-serving "/CN=$node" serverAuth "DNS:$node,IP:$node_ip"

openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out sa.key 2>/dev/null
openssl pkey -in sa.key -pubout -out sa.pub

for user in admin kubelet kube-controller-manager kube-scheduler kube-proxy; do
  cat > "$user.kubeconfig" <<YAML
apiVersion: v1
kind: Config
clusters:
- name: egress-e2e
  cluster:
    server: https://$node_ip:6443
    certificate-authority: $dir/ca.crt
users:
- name: $user
  user:
    client-certificate: $dir/$user.crt
    client-key: $dir/$user.key
contexts:
- name: $user
  context: {cluster: egress-e2e, user: $user}
current-context: $user
YAML
done
touch done
