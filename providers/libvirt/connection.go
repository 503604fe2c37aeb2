package libvirt

import (
	"context"
	"fmt"
	"sync"
	"time"

	"libvirt.org/go/libvirt"
)

// The client event loop. libvirt's remote driver sends keepalive requests
// and notices a closed connection only when an event loop runs in the
// client (virConnectSetKeepAlive: "the client has to implement and run an
// event loop with virEventRegisterImpl() or virEventRegisterDefaultImpl()
// to be able to use keepalive messages",
// https://libvirt.org/html/libvirt-libvirt-host.html#virConnectSetKeepAlive).
// The implementation is process-wide and must be registered before the
// connection is opened (a connection opened earlier has no watch on its
// socket and no keepalive: libvirt's rpc/virnetclient.c disables both
// when virEventAddHandle fails), so New registers it once; one goroutine
// runs it for the life of the process, on an OS thread of its own.
var (
	eventLoopOnce sync.Once
	errEventLoop  error
)

func startEventLoop() error {
	eventLoopOnce.Do(func() {
		if errEventLoop = libvirt.EventRegisterDefaultImpl(); errEventLoop != nil {
			return
		}
		go func() {
			for {
				if err := libvirt.EventRunDefaultImpl(); err != nil {
					// Only a broken poll(2) gets here; do not spin.
					time.Sleep(time.Second)
				}
			}
		}()
	})
	return errEventLoop
}

// conn returns the region's connection with a reference of the caller's
// own (release it with Close), opening it when there is none, the one
// held is dead (closed by keepalive or by the daemon: the close callback
// has forgotten it already), or the credential files it was opened with
// have changed (a rotated Secret). The reference keeps the connection
// valid for a call in flight when another goroutine drops it.
//
// One call per region opens a connection at a time; the others wait for
// it or for their ctx. virConnectOpen has no keepalive yet (it is set on
// the open connection) and no timeout: against a daemon that accepts the
// socket and never answers (frozen, or a host that hangs) it blocks until
// the daemon answers, so every call would otherwise strand a goroutine
// and an OS thread there.
func (p *Provider) conn(ctx context.Context, region string) (*libvirt.Connect, error) {
	uri := p.cfg.Regions[region].URI
	fp := fingerprint(credentialFiles(uri))
	for {
		if c := p.held(region); c != nil {
			if alive, err := c.IsAlive(); err == nil && alive && p.openedWith(region) == fp {
				return c, nil
			}
			p.drop(region, c)
			_, _ = c.Close()
		}
		p.mu.Lock()
		if busy, ok := p.opening[region]; ok {
			p.mu.Unlock()
			select {
			case <-busy:
				continue // opened (or failed): look again
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		mine := make(chan struct{})
		p.opening[region] = mine
		p.mu.Unlock()
		c, err := p.open(region, uri)
		p.mu.Lock()
		delete(p.opening, region)
		close(mine)
		if err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("connect to region %s: %w", region, err)
		}
		if held := p.conns[region]; held != nil {
			// Opened beside an open that finished first; keep one.
			p.mu.Unlock()
			_ = c.UnregisterCloseCallback()
			_, _ = c.Close()
			continue
		}
		p.conns[region], p.prints[region] = c, fp
		err = c.Ref()
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// held returns the region's connection with a new reference, or nil.
func (p *Provider) held(region string) *libvirt.Connect {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[region]
	if c == nil || c.Ref() != nil {
		return nil
	}
	return c
}

func (p *Provider) openedWith(region string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prints[region]
}

// open connects to the region's daemon, turns keepalive on, registers the
// close callback and learns which domain type the host offers.
func (p *Provider) open(region, uri string) (*libvirt.Connect, error) {
	open := libvirt.NewConnect
	if p.hooks.connect != nil {
		open = p.hooks.connect
	}
	c, err := open(uri)
	if err != nil {
		return nil, err
	}
	// A driver without RPC (the test driver, in process) has no
	// keepalive: ERR_NO_SUPPORT. Over RPC, 1 is a daemon that does not
	// speak it (libvirt before 0.9.8); the call's budget still bounds it.
	if err := c.SetKeepAlive(int(p.cfg.KeepaliveInterval.Seconds()), p.cfg.KeepaliveCount); err != nil && code(err) != libvirt.ERR_NO_SUPPORT {
		_, _ = c.Close()
		return nil, err
	}
	// The callback runs in the event loop when the connection closes
	// (keepalive timed out, the daemon went away, EOF): the next call
	// opens a new one instead of finding this one dead first.
	if err := c.RegisterCloseCallback(func(*libvirt.Connect, libvirt.ConnectCloseReason) { p.forget(region, c) }); err != nil {
		_, _ = c.Close()
		return nil, err
	}
	if err := p.learnDomainType(region, c); err != nil {
		_ = c.UnregisterCloseCallback()
		_, _ = c.Close()
		return nil, err
	}
	return c, nil
}

// forget is the close callback: the connection is closed, calls waiting
// on it have failed, and the next call opens a new one. It runs on the
// event loop's thread, where closing the connection could wait on the
// loop itself, so drop's Close runs on a goroutine of its own.
func (p *Provider) forget(region string, c *libvirt.Connect) {
	p.mu.Lock()
	held := p.conns[region] == c
	if held {
		delete(p.conns, region)
	}
	p.closed++
	p.mu.Unlock()
	if held {
		go func() {
			_ = c.UnregisterCloseCallback()
			_, _ = c.Close()
		}()
	}
}

// take waits for the region's connection to have no call in flight, or
// for ctx, and returns the function that ends this call's turn. Calls on
// one connection take turns because of libvirt 9.0's client
// (src/rpc/virnetclient.c): when keepalive closes a connection several
// calls wait on, only the call reading the socket is woken; the others
// stay blocked until the daemon answers, and when it does the client,
// already closed, can crash the process (SIGSEGV in the waiting call;
// GLib: "g_main_loop_quit: assertion 'loop != NULL' failed"). With one
// call at a time, keepalive fails that call and nothing else waits on the
// dead connection. Image and seed upload streams write outside the turns
// (imageUpload.Write, UploadSeed's copy is a turn of its own).
func (p *Provider) take(ctx context.Context, region string) (release func(), err error) {
	p.mu.Lock()
	turn, ok := p.turns[region]
	if !ok {
		turn = make(chan struct{}, 1)
		p.turns[region] = turn
	}
	p.mu.Unlock()
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// drop forgets a broken connection so the next call opens a new one.
func (p *Provider) drop(region string, c *libvirt.Connect) {
	p.mu.Lock()
	held := p.conns[region] == c
	if held {
		delete(p.conns, region)
	}
	p.mu.Unlock()
	if held {
		_ = c.UnregisterCloseCallback()
		_, _ = c.Close()
	}
}
