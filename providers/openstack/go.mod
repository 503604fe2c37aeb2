module github.com/egress-proxies/egress-proxies-operator/providers/openstack

go 1.26.0

require (
	github.com/egress-proxies/egress-proxies-operator/contract v0.1.0
	github.com/go-logr/logr v1.4.4
	github.com/gophercloud/gophercloud/v2 v2.16.0
	go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp v0.72.0
	go.opentelemetry.io/otel/sdk v1.47.0
	go.opentelemetry.io/otel/trace v1.47.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/egress-proxies/egress-proxies-operator/contract/contracttest v0.1.0
	github.com/felixge/httpsnoop v1.1.0 // indirect
	github.com/go-logr/stdr v1.2.2 // indirect
	github.com/kr/text v0.2.0 // indirect
	go.opentelemetry.io/auto/sdk v1.2.1 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/log v1.47.0 // indirect
	go.opentelemetry.io/otel/metric v1.47.0 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
)
