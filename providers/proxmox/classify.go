package proxmox

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"regexp"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// TaskError is a PVE task that ended with an error exit status: neither
// OK nor WARNINGS: <n> (taskSucceeded).
// go-proxmox's Task.Wait returns nil for such a task; the provider checks
// the exit status itself and returns this.
type TaskError struct {
	Type       string // qmclone, qmstart, qmdestroy, imgcopy, …
	UPID       string
	ExitStatus string
}

func (e *TaskError) Error() string {
	return fmt.Sprintf("task %s failed: %s", e.Type, e.ExitStatus)
}

// Message patterns, from PVE's sources and captured answers (see
// pvefake's doc comment for each text).
var (
	// A missing VM (pve-guest-common AbstractConfig.pm load_config); a
	// missing volume (pve-storage Storage/Plugin.pm activate_volume).
	notFoundRE = regexp.MustCompile(`^Configuration file '[^']*' does not exist$|^volume '[^']*' does not exist$`)
	// Storage out of space: LVM, ZFS, dir/NFS (ENOSPC), Ceph.
	quotaRE = regexp.MustCompile(`(?i)insufficient free space|no space left on device|out of space|not enough space|quota exceeded|disk quota`)
	// Requests PVE will refuse the same way until a person changes the
	// config or the cluster: a missing storage or node, a wrong content
	// type, a template that cannot start, a linked clone with a storage.
	// A clone to another node of a template with a volume on storage
	// that is not shared, or to such a storage, too (qemu-server clone_vm).
	permanentRE = regexp.MustCompile(`^storage '[^']*' does not exist$|does not support '[^']*' content|^no such cluster node|^hostname lookup '[^']*' failed|you can't start a vm if it's a template|not allowed for linked clones|^Linked clone feature is not supported|^can't clone VM to node '[^']*' \(VM uses local storage\)$|^can't clone to non-shared storage '[^']*'$`)
	// localCloneRE is clone_vm's refusal to clone a VM with local volumes
	// to another node: Create explains it (cloneNew).
	localCloneRE = regexp.MustCompile(`^can't clone VM to node '[^']*' \(VM uses local storage\)$`)
	// A VMID another clone took first: on the node serving the clone
	// (qemu-server clone_vm's `-f $conffile`), from /cluster/nextid
	// (PVE::Cluster::check_vmid_unused), or on another node, which fails
	// the clone task when pmxcfs refuses its temporary config
	// (pve-cluster src/pmxcfs/memdb.c memdb_rename: EEXIST).
	vmidTakenRE = regexp.MustCompile(`VM \d+ already exists|unable to create VM \d+: config file already exists|^close \(rename\) atomic file '/etc/pve/nodes/[^/']+/qemu-server/\d+\.conf' failed: File exists$`)
	// The guest agent is not (yet) answering: no address, not an error.
	// qemu-server's assert_agent_available (QemuServer/Agent.pm): no
	// `agent` key, the VM not running, guest-ping unanswered within 3 s;
	// then the command itself unanswered within QMPClient's 5 s
	// (QMPClient.pm cmd/mux_timeout; the peer is "qmp" on PVE 8.4, "qga"
	// on 9.x).
	noAgentRE = regexp.MustCompile(`^QEMU guest agent is not running$|^No QEMU guest agent configured$|^VM \d+ is not running$|^VM \d+ (qmp|qga) command 'guest-[a-z-]+' failed - got timeout$`)
)

// classify maps a PVE error to its contract class (template entry 13). It
// is the only place that does; every call goes through it.
func classify(err error) error {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var api *APIError
	var task *TaskError
	switch {
	case errors.As(err, &api):
		switch {
		case api.StatusCode == http.StatusUnauthorized, api.StatusCode == http.StatusForbidden:
			// 401: the token is wrong, expired or revoked; 403
			// "Permission check failed (/vms/100, VM.Clone)": a privilege
			// is missing. Neither heals without a person.
			return contract.Permanent(err)
		case api.StatusCode == http.StatusBadRequest && api.Params["upid"] == "no such task":
			// The node serving the call has no log of that task
			// (pve-manager API2/Tasks.pm read_task_status).
			return contract.NotFound(err)
		case api.StatusCode == http.StatusBadRequest, api.StatusCode == http.StatusNotImplemented:
			// "Parameter verification failed." or a method PVE lacks.
			return contract.Permanent(err)
		case notFoundRE.MatchString(api.Message):
			return contract.NotFound(err)
		case quotaRE.MatchString(api.Message):
			return contract.Quota(err)
		case permanentRE.MatchString(api.Message):
			return contract.Permanent(err)
		}
		// "VM is locked (…)", "can't lock file … got timeout", 595/596
		// from a proxied node, any other 5xx: transient.
		return err
	case errors.As(err, &task):
		switch {
		case quotaRE.MatchString(task.ExitStatus):
			return contract.Quota(err)
		case permanentRE.MatchString(task.ExitStatus):
			return contract.Permanent(err)
		}
		// "clone failed: can't lock file …", a start that timed out: retried.
		return err
	case isCertificateError(err):
		// Retrying cannot help until a person trusts the certificate.
		return contract.Permanent(err)
	}
	// Connection refused, reset, a lost answer: transient.
	return err
}

func apiMessage(err error) (int, string) {
	var api *APIError
	if errors.As(err, &api) {
		return api.StatusCode, api.Message
	}
	return 0, ""
}

func isVMIDTaken(err error) bool {
	_, msg := apiMessage(err)
	var task *TaskError
	if errors.As(err, &task) {
		msg = task.ExitStatus
	}
	return vmidTakenRE.MatchString(msg)
}

func isLocalClone(err error) bool {
	_, msg := apiMessage(err)
	return localCloneRE.MatchString(msg)
}

func isNoAgent(err error) bool {
	_, msg := apiMessage(err)
	return noAgentRE.MatchString(msg)
}

func isCertificateError(err error) bool {
	var unknown x509.UnknownAuthorityError
	var invalid x509.CertificateInvalidError
	var hostname x509.HostnameError
	var verify *tls.CertificateVerificationError
	return errors.As(err, &unknown) || errors.As(err, &invalid) || errors.As(err, &hostname) || errors.As(err, &verify)
}
