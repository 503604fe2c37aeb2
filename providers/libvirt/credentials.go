package libvirt

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
)

// credentialFiles are the files a connection URI's transport reads at
// connect: the SSH key and known hosts (keyfile=, known_hosts=) and the TLS
// certificates under pkipath=. They come from the mounted credentials
// Secret (credentials: mounted-files).
func credentialFiles(uri string) []string {
	u, err := url.Parse(uri)
	if err != nil {
		return nil
	}
	q := u.Query()
	var files []string
	for _, key := range []string{"keyfile", "known_hosts"} {
		if v := q.Get(key); v != "" {
			files = append(files, v)
		}
	}
	if dir := q.Get("pkipath"); dir != "" {
		for _, name := range []string{"cacert.pem", "clientcert.pem", "clientkey.pem"} {
			files = append(files, filepath.Join(dir, name))
		}
	}
	return files
}

// fingerprint says which version of the credential files a connection was
// opened with: a rotated Secret changes it, and the next call reconnects
// with the new files, without a restart. A missing file is part of the
// fingerprint too (libvirt reports it when it connects).
func fingerprint(files []string) string {
	var b strings.Builder
	for _, f := range files {
		if info, err := os.Stat(f); err == nil {
			fmt.Fprintf(&b, "%s %d %d;", f, info.ModTime().UnixNano(), info.Size())
		} else {
			fmt.Fprintf(&b, "%s missing;", f)
		}
	}
	return b.String()
}
