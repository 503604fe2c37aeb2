package main

import (
	"fmt"
	"io/fs"
	"strconv"
	"strings"
)

// list is a flag given once per value.
type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

// hostToImage splits "HOST=IMAGE[:MODE]" (-binary, -file).
func hostToImage(flagName, v string) (host, image string, mode fs.FileMode, err error) {
	host, image, ok := strings.Cut(v, "=")
	if !ok || host == "" || image == "" {
		return "", "", 0, fmt.Errorf("-%s %q: want HOST_PATH=IMAGE_PATH[:MODE]", flagName, v)
	}
	if i := strings.LastIndex(image, ":"); i >= 0 {
		if mode, err = parseMode(image[i+1:]); err != nil {
			return "", "", 0, fmt.Errorf("-%s %q: %w", flagName, v, err)
		}
		image = image[:i]
	}
	return host, image, mode, nil
}

// parseMode reads an octal mode ("0755", "1777") with the sticky and
// set-id bits as fs.FileMode flags.
func parseMode(s string) (fs.FileMode, error) {
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil || n > 0o7777 {
		return 0, fmt.Errorf("mode %q: want octal permission bits like 0755 or 1777", s)
	}
	m := fs.FileMode(n & 0o777)
	if n&0o4000 != 0 {
		m |= fs.ModeSetuid
	}
	if n&0o2000 != 0 {
		m |= fs.ModeSetgid
	}
	if n&0o1000 != 0 {
		m |= fs.ModeSticky
	}
	return m, nil
}

// dirSpec reads -dir's "IMAGE_PATH[:MODE[:UID:GID]]".
func dirSpec(v string) (p string, mode fs.FileMode, uid, gid int, err error) {
	parts := strings.Split(v, ":")
	p, mode = parts[0], 0o755
	bad := func(why string) error { return fmt.Errorf("-dir %q: %s; want IMAGE_PATH[:MODE[:UID:GID]]", v, why) }
	switch len(parts) {
	case 1:
	case 2, 4:
		if mode, err = parseMode(parts[1]); err != nil {
			return "", 0, 0, 0, bad(err.Error())
		}
		if len(parts) == 4 {
			if uid, gid, err = ids(parts[2] + ":" + parts[3]); err != nil {
				return "", 0, 0, 0, bad(err.Error())
			}
		}
	default:
		return "", 0, 0, 0, bad("wrong number of fields")
	}
	return p, mode, uid, gid, nil
}

// ids reads "UID:GID", both numbers.
func ids(v string) (uid, gid int, err error) {
	u, g, ok := strings.Cut(v, ":")
	if !ok {
		return 0, 0, fmt.Errorf("%q: want UID:GID", v)
	}
	if uid, err = strconv.Atoi(u); err != nil || uid < 0 {
		return 0, 0, fmt.Errorf("uid %q: want a number", u)
	}
	if gid, err = strconv.Atoi(g); err != nil || gid < 0 {
		return 0, 0, fmt.Errorf("gid %q: want a number", g)
	}
	return uid, gid, nil
}

// keyValues reads repeated KEY=VALUE flags into a map.
func keyValues(flagName string, l list) (map[string]string, error) {
	m := make(map[string]string, len(l))
	for _, kv := range l {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("-%s %q: want KEY=VALUE", flagName, kv)
		}
		m[k] = v
	}
	return m, nil
}
