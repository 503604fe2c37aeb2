module github.com/egress-proxies/egress-proxies-operator/hack/e2e/node/probe

go 1.26.0
