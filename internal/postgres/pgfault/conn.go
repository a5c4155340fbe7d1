package pgfault

import (
	"bytes"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// conn is one client connection and its server connection. Its fields but
// the sockets are guarded by the proxy's mutex.
type conn struct {
	p              *Proxy
	client, server net.Conn
	once           sync.Once
	dead           atomic.Bool

	started bool              // the startup message has passed
	opaque  bool              // TLS or GSS was asked for: forwarded unread
	budget  int               // bytes left before a reset (0: no limit)
	broken  bool              // a blackhole ate some of its bytes
	txlog   []string          // statements of the open transaction
	stmts   map[string]string // prepared statement name → SQL
}

// close closes both sides; reset makes the client's side an RST.
func (c *conn) close(reset bool) {
	c.once.Do(func() {
		c.dead.Store(true)
		if tc, ok := c.client.(*net.TCPConn); ok && reset {
			_ = tc.SetLinger(0)
		}
		c.client.Close()
		c.server.Close()
	})
}

func (c *conn) pump(src, dst net.Conn, fromClient bool) {
	defer c.p.wg.Done()
	defer func() {
		c.close(false)
		c.p.mu.Lock()
		delete(c.p.conns, c)
		c.p.mu.Unlock()
	}()
	buf := make([]byte, 32<<10)
	var pending []byte
	for {
		n, err := src.Read(buf)
		if n > 0 {
			pending = append(pending, buf[:n]...)
			ready, rest, stop := c.split(pending, fromClient)
			if len(ready) > 0 && c.send(dst, ready) != nil {
				return
			}
			if stop {
				c.close(true)
				return
			}
			pending = append([]byte(nil), rest...)
		}
		if err != nil {
			return
		}
	}
}

// send forwards b through the proxy's stall, blackhole, slowness and byte
// budget.
func (c *conn) send(dst net.Conn, b []byte) error {
	discard, delay := c.p.gate(c)
	if delay > 0 {
		time.Sleep(delay)
	}
	c.p.mu.Lock()
	if discard {
		c.broken = true
		c.p.mu.Unlock()
		return nil
	}
	reset := false
	if c.budget > 0 {
		if len(b) >= c.budget {
			b, reset = b[:c.budget], true
			c.p.stats.Resets++
		} else {
			c.budget -= len(b)
		}
	}
	c.p.mu.Unlock()
	if _, err := dst.Write(b); err != nil {
		return err
	}
	if reset {
		c.close(true)
		return errClosed
	}
	return nil
}

// split cuts b into the complete messages to forward and the rest; stop
// says a fault acted on the message after the ones to forward.
func (c *conn) split(b []byte, fromClient bool) (ready, rest []byte, stop bool) {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	off := 0
	if fromClient && !c.started {
		if len(b) < 8 || len(b) < int(binary.BigEndian.Uint32(b)) {
			return nil, b, false
		}
		switch binary.BigEndian.Uint32(b[4:]) {
		case 80877103, 80877104: // SSLRequest, GSSENCRequest
			c.opaque = true
		}
		c.started = true
		off = int(binary.BigEndian.Uint32(b))
	}
	if c.opaque {
		return b, nil, false
	}
	for len(b)-off >= 5 {
		l := int(binary.BigEndian.Uint32(b[off+1:]))
		if len(b)-off < 1+l {
			break
		}
		if c.inspect(b[off:off+1+l], fromClient) {
			return b[:off], nil, true
		}
		off += 1 + l
	}
	return b[:off], b[off:], false
}

func cstring(b []byte) (string, []byte) {
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return string(b), nil
	}
	return string(b[:i]), b[i+1:]
}

// inspect reads one message and says whether a fault acts on it instead of
// forwarding it.
func (c *conn) inspect(msg []byte, fromClient bool) bool {
	body := msg[5:]
	if fromClient {
		switch msg[0] {
		case 'Q':
			sql, _ := cstring(body)
			return c.statement(sql)
		case 'P':
			name, rest := cstring(body)
			c.stmts[name], _ = cstring(rest)
		case 'B':
			_, rest := cstring(body)
			name, _ := cstring(rest)
			return c.statement(c.stmts[name])
		}
		return false
	}
	switch msg[0] {
	case 'C':
		if tag, _ := cstring(body); tag == "COMMIT" {
			c.p.stats.Commits++
			return c.fire(&c.p.drops, c.ran, func() { c.p.stats.CommitsDropped++ })
		}
	case 'Z':
		if len(body) > 0 && body[0] == 'I' {
			c.txlog = nil
		}
	}
	return false
}

// statement records a statement the client runs and says whether a reset
// armed for it acts.
func (c *conn) statement(sql string) bool {
	if strings.HasPrefix(strings.ToUpper(strings.TrimSpace(sql)), "BEGIN") {
		c.txlog = nil
	}
	c.txlog = append(c.txlog, sql)
	return c.fire(&c.p.resets, func(m string) bool { return strings.Contains(sql, m) }, func() { c.p.stats.Resets++ })
}

// fire counts the faults in list whose match matches and says whether one
// of them acts now; it is removed once it has.
func (c *conn) fire(list *[]*Armed, matches func(string) bool, count func()) bool {
	for i, a := range *list {
		if !matches(a.match) {
			continue
		}
		if a.nth--; a.nth > 0 {
			continue
		}
		*list = append((*list)[:i:i], (*list)[i+1:]...)
		count()
		close(a.fired)
		return true
	}
	return false
}

func (c *conn) ran(match string) bool {
	for _, s := range c.txlog {
		if strings.Contains(s, match) {
			return true
		}
	}
	return false
}
