// Package pgfault is a fault proxy for PostgreSQL's wire protocol: it
// forwards a client's connections to a server and, on command, loses a
// COMMIT's answer, resets connections, stalls, blackholes or slows them.
// It reads the protocol only far enough to know which statements each
// transaction ran and where a COMMIT's CommandComplete is.
package pgfault

import (
	"errors"
	"net"
	"strings"
	"sync"
	"time"
)

// Proxy listens on a local port and forwards every connection to a server.
type Proxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	conns   map[*conn]struct{}
	drops   []*Armed
	resets  []*Armed
	byBytes int // reset every connection after this many more bytes (0: off)
	stall   time.Time
	black   time.Time
	delay   time.Duration
	slowTo  time.Time
	stats   Stats
	closing bool
	wg      sync.WaitGroup
}

// Stats counts what the proxy saw and did.
type Stats struct {
	Connections    int
	Commits        int
	CommitsDropped int
	Resets         int
}

// Armed is one fault waiting for its transaction; Fired is closed once it
// has acted.
type Armed struct {
	match string
	nth   int
	fired chan struct{}
}

// Fired is closed when the fault has acted.
func (a *Armed) Fired() <-chan struct{} { return a.fired }

// Start listens on 127.0.0.1 on a free port and forwards to target
// (host:port).
func Start(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, conns: map[*conn]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr is the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// URL rewrites a PostgreSQL URL's host:port to the proxy's.
func (p *Proxy) URL(dbURL string) string {
	return strings.Replace(dbURL, p.target, p.Addr(), 1)
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closing = true
	for c := range p.conns {
		c.close(false)
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

// Stats returns the counts so far.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// DropCommitAnswer arms a lost COMMIT answer: the nth COMMIT from now of a
// transaction that ran a statement containing match ("" for any) reaches
// the server, which commits, and the client's connection is closed instead
// of getting its CommandComplete. sqlc's statements carry their names, so
// match may be "-- name: IdempotencyKeyComplete ".
func (p *Proxy) DropCommitAnswer(match string, nth int) *Armed {
	a := &Armed{match: match, nth: max(nth, 1), fired: make(chan struct{})}
	p.mu.Lock()
	p.drops = append(p.drops, a)
	p.mu.Unlock()
	return a
}

// ResetOnStatement arms a reset: when the nth statement containing match is
// sent, the connection is reset before the server gets it. Inside a
// transaction the server rolls the transaction back; a statement alone is
// lost with its answer.
func (p *Proxy) ResetOnStatement(match string, nth int) *Armed {
	a := &Armed{match: match, nth: max(nth, 1), fired: make(chan struct{})}
	p.mu.Lock()
	p.resets = append(p.resets, a)
	p.mu.Unlock()
	return a
}

// ResetAfterBytes resets every connection, open or new, once it has
// forwarded n more bytes; 0 turns it off.
func (p *Proxy) ResetAfterBytes(n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byBytes = n
	for c := range p.conns {
		c.budget = n
	}
}

// ResetAll resets every open connection now: the pool's idle connections
// are broken without the client knowing.
func (p *Proxy) ResetAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close(true)
		p.stats.Resets++
	}
}

// Stall stops forwarding on every connection for d; what was sent waits and
// goes on afterwards, in order.
func (p *Proxy) Stall(d time.Duration) {
	p.mu.Lock()
	p.stall = time.Now().Add(d)
	p.mu.Unlock()
}

// Blackhole discards every byte on every connection for d; the connections
// that lost bytes are closed when it ends, as their streams are broken.
func (p *Proxy) Blackhole(d time.Duration) {
	p.mu.Lock()
	p.black = time.Now().Add(d)
	p.mu.Unlock()
	time.AfterFunc(d, p.closeBroken)
}

// Slow delays every forwarded read by delay for d.
func (p *Proxy) Slow(delay, d time.Duration) {
	p.mu.Lock()
	p.delay, p.slowTo = delay, time.Now().Add(d)
	p.mu.Unlock()
}

// Clear removes every fault that has not acted yet and ends stalls,
// blackholes and slowness.
func (p *Proxy) Clear() {
	p.mu.Lock()
	p.drops, p.resets, p.byBytes = nil, nil, 0
	p.stall, p.black, p.slowTo = time.Time{}, time.Time{}, time.Time{}
	for c := range p.conns {
		c.budget = 0
	}
	p.mu.Unlock()
	p.closeBroken()
}

func (p *Proxy) closeBroken() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		if c.broken {
			c.close(true)
		}
	}
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			return
		}
		sc, err := net.Dial("tcp", p.target)
		if err != nil {
			cc.Close()
			continue
		}
		c := &conn{p: p, client: cc, server: sc, stmts: map[string]string{}}
		p.mu.Lock()
		if p.closing {
			p.mu.Unlock()
			cc.Close()
			sc.Close()
			return
		}
		c.budget = p.byBytes
		p.conns[c] = struct{}{}
		p.stats.Connections++
		p.mu.Unlock()
		p.wg.Add(2)
		go c.pump(cc, sc, true)
		go c.pump(sc, cc, false)
	}
}

// gate waits out a stall and says whether the bytes are to be discarded,
// and how long to delay them.
func (p *Proxy) gate(c *conn) (discard bool, delay time.Duration) {
	for {
		p.mu.Lock()
		stall, black, slow, d, closing := p.stall, p.black, p.slowTo, p.delay, p.closing
		p.mu.Unlock()
		now := time.Now()
		if closing || c.dead.Load() {
			return true, 0
		}
		if now.Before(stall) {
			time.Sleep(min(stall.Sub(now), 10*time.Millisecond))
			continue
		}
		if now.Before(slow) {
			delay = d
		}
		return now.Before(black), delay
	}
}

var errClosed = errors.New("pgfault: connection closed by a fault")
