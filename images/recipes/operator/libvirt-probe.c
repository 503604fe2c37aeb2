/*
 * Opens each libvirt URI given and prints what it got, one line each. The
 * smoke test (smoke.sh) runs it inside the libvirt image, bind-mounted and
 * not part of it, so the connection is made by the image's libraries: the
 * test driver in process, and qemu+libssh:// through libssh, which libvirt
 * runs in process as the operator's provider does. Exits 0 when every URI
 * connected.
 */
#include <stdio.h>
#include <libvirt/libvirt.h>
#include <libvirt/virterror.h>

static void quiet(void *data, virErrorPtr err) { (void)data; (void)err; }

int main(int argc, char **argv) {
	int rc = 0;
	virSetErrorFunc(NULL, quiet);
	for (int i = 1; i < argc; i++) {
		virConnectPtr c = virConnectOpen(argv[i]);
		if (c == NULL) {
			virErrorPtr e = virGetLastError();
			printf("%s: error: %s\n", argv[i], e && e->message ? e->message : "unknown");
			rc = 1;
			continue;
		}
		unsigned long v = 0;
		virConnectGetLibVersion(c, &v);
		printf("%s: connected, libvirt %lu\n", argv[i], v);
		virConnectClose(c);
	}
	return rc;
}
