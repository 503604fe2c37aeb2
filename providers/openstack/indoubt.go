package openstack

import (
	"errors"
	"fmt"
	"time"

	"github.com/gophercloud/gophercloud/v2"
)

// A server create whose answer never came is in doubt: cut by
// createTimeout or a lost connection, or answered by a load balancer's
// 5xx, it may have reached Nova's API, which may then record the build
// and list the server a moment later. A Create of the same request that
// lists nothing meanwhile and submits again would make a second server
// (collected by the GC only later). So the provider records the
// submission, and a later Create that lists no server waits (a transient
// error) until the server is listed or doubtFor × createTimeout has
// passed, then submits again. The record is this process's: a restarted
// operator submits at once.

// doubtFor is how many createTimeouts a create in doubt is waited for:
// the API works on a request its client gave up on for at most about as
// long as the client would have waited.
const doubtFor = 2

// doubt records key's create, submitted at submitted, in doubt, unless
// err is Nova's answer refusing it (a 4xx: nothing was made).
func (p *Provider) doubt(key string, submitted time.Time, err error) {
	var answered gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &answered) && answered.Actual >= 400 && answered.Actual < 500 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inDoubt == nil {
		p.inDoubt = map[string]time.Time{}
	}
	p.inDoubt[key] = submitted
}

// settleDoubt forgets key's create in doubt: its server is listed.
func (p *Provider) settleDoubt(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.inDoubt, key)
}

// waitOutDoubt returns a transient error while key's create is in doubt;
// once doubtFor × createTimeout has passed it forgets it, and the caller
// may submit again.
func (p *Provider) waitOutDoubt(key, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	submitted, ok := p.inDoubt[key]
	if !ok {
		return nil
	}
	until := submitted.Add(doubtFor * p.cfg.CreateTimeout.Duration)
	if time.Now().Before(until) {
		return fmt.Errorf("the create of %s submitted at %s is in doubt (its answer never came): waiting until %s for Nova to list its server before submitting again",
			name, submitted.UTC().Format(time.RFC3339), until.UTC().Format(time.RFC3339))
	}
	delete(p.inDoubt, key)
	return nil
}
