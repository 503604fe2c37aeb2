package proxmox

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

// The marks (gc-mark: native-labels, template entry 8). PVE tags allow
// `[a-z0-9_][a-z0-9_\-+.]*`, case-insensitive: no '/' or '=', so the
// contract's label keys are mapped to tag prefixes. A Kubernetes UID is
// lowercase hex and '-' (36 characters) and fits a tag as it is.
const (
	tagManaged = "egressproxies-managed"
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
	descManaged = contract.LabelManaged + "=" + contract.LegacyManagedValue
	descUID     = contract.LabelUID + "="
	descCreated = "egressproxies.io/created-at="
)

// marks is what a VM's tags and description say about it.
type marks struct {
	managed   bool
	uid       string
	createdAt time.Time
	started   bool
	tagged    bool // the tags (not only the description) carry managed and uid
}

// splitTags splits a PVE tag list; PVE accepts ';', ',' and spaces.
func splitTags(tags string) []string {
	return strings.FieldsFunc(strings.ToLower(tags), func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// readMarks reads the tags, then the description for what they lack.
func readMarks(tags, description string) marks {
	var m marks
	for _, t := range splitTags(tags) {
		switch {
		case t == tagManaged:
			m.managed = true
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
	m.tagged = m.managed && m.uid != ""
	for _, line := range strings.Split(description, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == descManaged:
			m.managed = true
		case strings.HasPrefix(line, descUID) && m.uid == "":
			m.uid = strings.TrimPrefix(line, descUID)
		case strings.HasPrefix(line, descCreated) && m.createdAt.IsZero():
			if t, err := time.Parse(time.RFC3339, strings.TrimPrefix(line, descCreated)); err == nil {
				m.createdAt = t
			}
		}
	}
	return m
}

// description is what the clone writes: a line for people, then the marks.
func description(uid string, created time.Time) string {
	return fmt.Sprintf("Egress proxy managed by egress-proxies-operator; do not edit the lines below.\n%s\n%s%s\n%s%s\n",
		descManaged, descUID, uid, descCreated, created.UTC().Format(time.RFC3339))
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

// ourTags are the marks written after the clone.
func ourTags(uid string, created time.Time) []string {
	return []string{tagManaged, tagUID + uid, tagCTime + strconv.FormatInt(created.Unix(), 10)}
}
