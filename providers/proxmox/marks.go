package proxmox

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The marks (gc-mark: native-labels, template entry 8). PVE tags allow
// `[a-z0-9_][a-z0-9_\-+.]*`, case-insensitive: no '/' or '=', so the
// contract's label keys are mapped to tag prefixes. A Kubernetes UID and
// an Owner (DNS-1123 labels) fit a tag as they are.
//
// LabelManaged is two tags: tagManaged on every VM this operator made,
// whatever its release, and tagOwner+<owner> naming the install and entry
// that made it. A VM with tagManaged and no owner tag was made before
// marks named their owner (contract v0.2): its owner reads as
// contract.LegacyManagedValue.
const (
	tagManaged = "egressproxies-managed"
	tagOwner   = "egressproxies-owner-"
	tagUID     = "egressproxies-uid-"
	tagCTime   = "egressproxies-ctime-"
	// tagStarted is written just before the first start: a stopped VM
	// without it has never run (provisioning-state: marker).
	tagStarted = "egressproxies-started"
)

// The same marks in the description, which the clone itself writes (the
// clone API takes no tags): they make a VM recognisable as this Proxy's
// between the clone's end and the tag write (the mark window).
const (
	descManaged = contract.LabelManaged + "="
	descUID     = contract.LabelUID + "="
	descCreated = "egressproxies.io/created-at="
	// descStarted is the started mark, written with the tag (or alone,
	// where the cluster's tag access refuses it) just before the first
	// start.
	descStarted = "egressproxies.io/started=true"
)

// marks is what a VM's tags and description say about it.
type marks struct {
	// owner is LabelManaged's value: an Owner, LegacyManagedValue, or ""
	// on a VM without the marks.
	owner     string
	uid       string
	createdAt time.Time
	started   bool
	tagged    bool // the tags (not only the description) carry managed and uid
}

// managed says the VM carries the managed mark, whoever made it.
func (m marks) managed() bool { return m.owner != "" }

// splitTags splits a PVE tag list; PVE accepts ';', ',' and spaces.
func splitTags(tags string) []string {
	return strings.FieldsFunc(strings.ToLower(tags), func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// readMarks reads the tags, then the description for what they lack.
func readMarks(tags, description string) marks {
	var m marks
	managed, owner := false, ""
	for _, t := range splitTags(tags) {
		switch {
		case t == tagManaged:
			managed = true
		case strings.HasPrefix(t, tagOwner) && owner == "":
			owner = strings.TrimPrefix(t, tagOwner)
		case strings.HasPrefix(t, tagUID):
			m.uid = strings.TrimPrefix(t, tagUID)
		case strings.HasPrefix(t, tagCTime):
			if s, err := strconv.ParseInt(strings.TrimPrefix(t, tagCTime), 10, 64); err == nil {
				m.createdAt = time.Unix(s, 0)
			}
		case t == tagStarted:
			m.started = true
		}
	}
	if managed {
		m.owner = cmp.Or(owner, contract.LegacyManagedValue)
	}
	m.tagged = m.managed() && m.uid != ""
	for _, line := range strings.Split(description, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, descManaged) && m.owner == "":
			m.owner = strings.TrimPrefix(line, descManaged)
		case strings.HasPrefix(line, descUID) && m.uid == "":
			m.uid = strings.TrimPrefix(line, descUID)
		case line == descStarted:
			m.started = true
		case strings.HasPrefix(line, descCreated) && m.createdAt.IsZero():
			if t, err := time.Parse(time.RFC3339, strings.TrimPrefix(line, descCreated)); err == nil {
				m.createdAt = t
			}
		}
	}
	return m
}

// description is what the clone writes: a line for people, then the marks.
func description(owner, uid string, created time.Time) string {
	return fmt.Sprintf("Egress proxy managed by egress-proxies-operator; do not edit the lines below.\n%s%s\n%s%s\n%s%s\n",
		descManaged, owner, descUID, uid, descCreated, created.UTC().Format(time.RFC3339))
}

// withTags returns the tag list with ours added, keeping the template's.
func withTags(existing string, add ...string) string {
	tags := splitTags(existing)
	for _, t := range add {
		if !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	return strings.Join(tags, ";")
}

// ourTags are the marks written after the clone. owner is the one the
// clone's description carries: a VM the previous release cloned keeps
// its legacy mark (no owner tag) when this release finishes it.
func ourTags(owner, uid string, created time.Time) []string {
	tags := []string{tagManaged}
	if owner != contract.LegacyManagedValue {
		tags = append(tags, tagOwner+owner)
	}
	return append(tags, tagUID+uid, tagCTime+strconv.FormatInt(created.Unix(), 10))
}

// withStarted is the description with the started mark added.
func withStarted(description string) string {
	for _, line := range strings.Split(description, "\n") {
		if strings.TrimSpace(line) == descStarted {
			return description
		}
	}
	if description != "" && !strings.HasSuffix(description, "\n") {
		description += "\n"
	}
	return description + descStarted + "\n"
}
