{{/*
The label that selects the operator's Pods; the same as the release
manifests', so a Deployment installed either way keeps its selector.
*/}}
{{- define "egress-proxies.selectorLabels" -}}
app.kubernetes.io/name: egress-proxies-operator
{{- end }}

{{/*
Helm's bookkeeping labels, on every object the chart renders (but the
CRDs, which Helm installs as they are). operator/internal/release ignores
them when it compares the chart with the release manifests.
*/}}
{{- define "egress-proxies.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* The operator's ServiceAccount, which every binding names. */}}
{{- define "egress-proxies.serviceAccount" -}}
- kind: ServiceAccount
  name: egress-proxies-controller-manager
  namespace: {{ .Release.Namespace }}
{{- end }}
