// Command probe proves a Pod of the lane's node can use the cluster the
// way the operator's Pod will (hack/e2e/node-check.sh runs it):
//
//	probe serve ADDR          answers every request with the client's address
//	probe check URL...        from inside a Pod, with POD_IP set:
//	  - resolves kubernetes.default.svc.cluster.local through cluster DNS
//	    and expects the kubernetes Service's address (API_SERVICE_IP);
//	  - asks the apiserver, through that Service and the Pod's service
//	    account (token and CA as the kubelet mounts them), who it is;
//	  - GETs each URL (a "probe serve" outside the cluster) and expects it
//	    to have seen the Pod's own address: nothing is masqueraded.
//	probe through PROXY URL   GETs URL through the forward proxy PROXY
//	                          (the end-to-end test's client Pod; through.go);
//	                          PROXY "env": the proxy the environment names.
//	probe loop PROXY URL EVERY  GETs URL through PROXY every EVERY until
//	                          stopped, a line per request (loop.go).
//
// Only the standard library, so it builds anywhere and its image is one
// static binary.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

const (
	apiName = "kubernetes.default.svc.cluster.local"
	saDir   = "/var/run/secrets/kubernetes.io/serviceaccount"
)

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: probe serve ADDR | probe check URL... | probe through PROXY URL | probe loop PROXY URL EVERY")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "serve":
		err = serve(os.Args[2])
	case "check":
		err = check(os.Args[2:])
	case "through":
		if len(os.Args) != 4 {
			err = fmt.Errorf("through: want PROXY URL, got %q", os.Args[2:])
			break
		}
		err = through(os.Args[2], os.Args[3], 2*time.Minute)
	case "loop":
		if len(os.Args) != 5 {
			err = fmt.Errorf("loop: want PROXY URL EVERY, got %q", os.Args[2:])
			break
		}
		err = loop(os.Args[2], os.Args[3], os.Args[4])
	default:
		err = fmt.Errorf("unknown mode %q: want serve, check, through or loop", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "probe:", err)
		os.Exit(1)
	}
}

// serve answers with the address the request came from (host only).
func serve(addr string) error {
	return http.ListenAndServe(addr, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprint(w, host)
	}))
}

func check(urls []string) error {
	podIP, apiIP := os.Getenv("POD_IP"), os.Getenv("API_SERVICE_IP")
	if podIP == "" || apiIP == "" {
		return fmt.Errorf("POD_IP %q and API_SERVICE_IP %q must both be set", podIP, apiIP)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	addrs, err := net.DefaultResolver.LookupHost(ctx, apiName)
	if err != nil {
		return fmt.Errorf("resolve %s: %w", apiName, err)
	}
	if len(addrs) != 1 || addrs[0] != apiIP {
		return fmt.Errorf("resolve %s: got %v, want [%s]", apiName, addrs, apiIP)
	}
	fmt.Printf("dns: %s is %s\n", apiName, addrs[0])

	user, err := whoami(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("apiserver: through https://%s the Pod is %s\n", apiName, user)

	for _, u := range urls {
		seen, err := get(ctx, http.DefaultClient, u)
		if err != nil {
			return err
		}
		if seen != podIP {
			return fmt.Errorf("GET %s: the server saw %s, want the Pod's own address %s", u, seen, podIP)
		}
		fmt.Printf("route: %s saw the Pod's address %s\n", u, seen)
	}
	return nil
}

// whoami posts a SelfSubjectReview with the Pod's service account token,
// trusting only the CA the kubelet mounted: the apiserver's answer names
// the user it authenticated.
func whoami(ctx context.Context) (string, error) {
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		return "", err
	}
	ca, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		return "", err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return "", fmt.Errorf("%s/ca.crt: no certificate", saDir)
	}
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	body := `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost,
		"https://"+apiName+"/apis/authentication.k8s.io/v1/selfsubjectreviews", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("apiserver: %w", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("apiserver: SelfSubjectReview: %s: %s", resp.Status, b)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(b, &review); err != nil {
		return "", fmt.Errorf("apiserver: SelfSubjectReview: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

func get(ctx context.Context, c *http.Client, u string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", fmt.Errorf("GET %s: %w", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("GET %s: %s, reading the body: %w", u, resp.Status, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return string(b), nil
}
