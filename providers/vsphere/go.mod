module github.com/egress-proxies/egress-proxies-operator/providers/vsphere

go 1.26.0

require (
	github.com/egress-proxies/egress-proxies-operator/contract v0.1.0
	github.com/egress-proxies/egress-proxies-operator/contract/contracttest v0.1.0
	github.com/egress-proxies/egress-proxies-operator/images v0.1.0
	github.com/go-logr/logr v1.4.4
	github.com/vmware/govmomi v0.56.0
	go.yaml.in/yaml/v3 v3.0.5
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/kdomanski/iso9660 v0.4.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	go.opentelemetry.io/otel/sdk v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
