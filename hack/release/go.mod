module github.com/egress-proxies/egress-proxies-operator/hack/release

go 1.26.0

require (
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/mod v0.41.0
)
