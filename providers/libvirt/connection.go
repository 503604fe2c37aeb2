package libvirt

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// conn returns the connection of the region's slot with a reference of
// the caller's own (release it with Close), opening it when there is
// none, the one held is dead (closed by keepalive or by the daemon: the
// close callback has forgotten it already), or the credential files it
// was opened with have changed (a rotated Secret). The reference keeps
// the connection valid for a call in flight when another goroutine drops
// it.
//
// One call per region opens a connection at a time, whichever its slot;
// the others wait for it or for their ctx. virConnectOpen has no
// keepalive yet (it is set on the open connection) and no timeout:
// against a daemon that accepts the socket and never answers (frozen, or
// a host that hangs) it blocks until the daemon answers, so every call
// would otherwise strand a goroutine and an OS thread there.
func (p *Provider) conn(ctx context.Context, region string, slot int) (*libvirt.Connect, error) {
	uri := p.cfg.Regions[region].URI
	key := slotKey(region, slot)
	fp := fingerprint(credentialFiles(uri))
	for {
		if c := p.held(key); c != nil {
			if alive, err := c.IsAlive(); err == nil && alive && p.openedWith(key) == fp {
				return c, nil
			}
			p.drop(key, c)
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
		c, err := p.open(region, key, uri)
		p.mu.Lock()
		delete(p.opening, region)
		close(mine)
		if err != nil {
			p.mu.Unlock()
			return nil, fmt.Errorf("connect to region %s: %w", region, err)
		}
		if held := p.conns[key]; held != nil {
			// Opened beside an open that finished first; keep one.
			p.mu.Unlock()
			_ = c.UnregisterCloseCallback()
			_, _ = c.Close()
			continue
		}
		p.conns[key], p.prints[key] = c, fp
		err = c.Ref()
		p.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// slotKey names a region's connection slot in conns and prints.
func slotKey(region string, slot int) string { return region + "#" + strconv.Itoa(slot) }

// held returns the slot's connection with a new reference, or nil.
func (p *Provider) held(key string) *libvirt.Connect {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.conns[key]
	if c == nil || c.Ref() != nil {
		return nil
	}
	return c
}

func (p *Provider) openedWith(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.prints[key]
}

// open connects to the region's daemon for the slot key, turns keepalive
// on, registers the close callback and learns which domain type the host
// offers.
func (p *Provider) open(region, key, uri string) (*libvirt.Connect, error) {
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
	if err := c.RegisterCloseCallback(func(*libvirt.Connect, libvirt.ConnectCloseReason) { p.forget(key, c) }); err != nil {
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
func (p *Provider) forget(key string, c *libvirt.Connect) {
	p.mu.Lock()
	held := p.conns[key] == c
	if held {
		delete(p.conns, key)
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

// connectionsPerHost bounds the connections to one region's daemon, each
// carrying one call at a time (take). One domain call the daemon holds (a
// job-lock wait of up to 30 s, the destroy of a QEMU in D state, an agent
// query) then holds one connection, not every call on the host: with one
// connection a host, every other Proxy's call waited its turn and failed
// at its budget (TestASlowCallDoesNotHoldTheHost). Four is the operator's
// default cap on one provider entry's calls in flight (limits.concurrency,
// docs/operator.md), so at the defaults no call waits for a connection;
// beyond it calls wait for a free one.
const connectionsPerHost = 4

// hostSlots is which of a region's connections carry a call.
type hostSlots struct {
	free chan struct{} // a token per connection not carrying a call
	busy [connectionsPerHost]bool
}

// take waits for one of the region's connections to carry no call, or
// for ctx, and returns its slot and the function that ends this call's
// turn on it. The lowest free slot is taken, so calls one after another
// keep to one connection. Calls on one connection take turns because of
// libvirt 9.0's client (src/rpc/virnetclient.c): when keepalive closes a
// connection several calls wait on, only the call reading the socket is
// woken; the others stay blocked until the daemon answers, and when it
// does the client, already closed, can crash the process (SIGSEGV in the
// waiting call; GLib: "g_main_loop_quit: assertion 'loop != NULL'
// failed"). With one call at a time on each, keepalive fails that call and
// nothing else waits on the dead connection (TestFrozenDaemonIsDetected).
// Image and seed upload streams write outside the turns
// (imageUpload.Write, UploadSeed's copy is a turn of its own).
func (p *Provider) take(ctx context.Context, region string) (slot int, release func(), err error) {
	p.mu.Lock()
	s, ok := p.slots[region]
	if !ok {
		s = &hostSlots{free: make(chan struct{}, connectionsPerHost)}
		for range connectionsPerHost {
			s.free <- struct{}{}
		}
		p.slots[region] = s
	}
	p.mu.Unlock()
	select {
	case <-s.free:
	case <-ctx.Done():
		return 0, nil, ctx.Err()
	}
	p.mu.Lock()
	slot = slices.Index(s.busy[:], false)
	s.busy[slot] = true
	p.mu.Unlock()
	return slot, func() {
		p.mu.Lock()
		s.busy[slot] = false
		p.mu.Unlock()
		s.free <- struct{}{}
	}, nil
}

// drop forgets a broken connection so the next call opens a new one.
func (p *Provider) drop(key string, c *libvirt.Connect) {
	p.mu.Lock()
	held := p.conns[key] == c
	if held {
		delete(p.conns, key)
	}
	p.mu.Unlock()
	if held {
		_ = c.UnregisterCloseCallback()
		_, _ = c.Close()
	}
}
