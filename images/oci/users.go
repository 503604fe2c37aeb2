package oci

import (
	"fmt"
	"path"
	"regexp"
)

var userName = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// AddUser writes /etc/passwd and /etc/group holding root and one user
// (its group of the same name), and the user's home, owned by it — as
// distroless's nonroot (65532) is. Their login shell is /sbin/nologin,
// which the image need not hold: nothing here logs in. Programs that look
// up their own user (libssh finding ~/.ssh, Go's os/user) find an entry.
func AddUser(t *Tree, name string, uid, gid int) error {
	if !userName.MatchString(name) {
		return fmt.Errorf("user name %q: want a POSIX user name (lower case letters, digits, _ and -)", name)
	}
	if uid <= 0 || gid <= 0 {
		return fmt.Errorf("user %s %d:%d: want a uid and a gid above 0 (root is in the files already)", name, uid, gid)
	}
	home := path.Join("/home", name)
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\n%s:x:%d:%d:%s:%s:/sbin/nologin\n", name, uid, gid, name, home)
	group := fmt.Sprintf("root:x:0:\n%s:x:%d:\n", name, gid)
	for _, err := range []error{
		t.AddFile("/etc/passwd", []byte(passwd), 0o644),
		t.AddFile("/etc/group", []byte(group), 0o644),
		t.AddDir("/root", 0o700, 0, 0),
		t.AddDir(home, 0o700, uid, gid),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}
