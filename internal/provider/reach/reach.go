// Package reach tells from the transport itself whether one provider call
// put any byte of its request on a connection (CONTRACT §15): every try of
// the call, the client library's own retries and net/http's silent re-sends
// included, is traced on the call's context, and what the trace saw is
// checked against the type of the error the call ended with.
package reach

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http/httptrace"
	"sync/atomic"
)

// Call is what the transport did during one provider call. It is safe for
// concurrent use: a dial abandoned at a deadline reports on its own
// goroutine.
type Call struct {
	// conns counts the connections the call got; each may have carried
	// a send, and a request is only ever written on one.
	conns atomic.Int32
	// wrote: some try wrote its headers or its whole request.
	wrote atomic.Bool
	// failed: a name lookup, a dial or a TLS handshake failed.
	failed atomic.Bool
}

// Trace returns ctx traced for one call (every request sent with it is
// counted) and the call's record.
func Trace(ctx context.Context) (context.Context, *Call) {
	c := &Call{}
	fail := func(err error) {
		if err != nil {
			c.failed.Store(true)
		}
	}
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn:          func(httptrace.GotConnInfo) { c.conns.Add(1) },
		WroteHeaders:     func() { c.wrote.Store(true) },
		WroteRequest:     func(httptrace.WroteRequestInfo) { c.wrote.Store(true) },
		DNSDone:          func(i httptrace.DNSDoneInfo) { fail(i.Err) },
		ConnectDone:      func(_, _ string, err error) { fail(err) },
		TLSHandshakeDone: func(_ tls.ConnectionState, err error) { fail(err) },
	}), c
}

// Sends is how many connections the call got. Counting one that carried
// nothing errs on the side of doubt.
func (c *Call) Sends() int { return int(c.conns.Load()) }

// Resent reports whether the call may have reached the provider more than
// once: its answer is then the answer to a re-send.
func (c *Call) Resent() bool { return c.Sends() > 1 }

// Unreached reports whether a call that ended with err wrote nothing of its
// request on any try: no try ever got a connection (net/http writes a
// request only on one it got), and the error is one that comes before a
// connection (a name that did not resolve, a refused or timed-out dial, a
// failed TLS handshake, a deadline that passed while dialing) or the trace
// saw such a failure. A cancellation proves no more than that the service
// stopped waiting, so it is never unreached.
func (c *Call) Unreached(err error) bool {
	if err == nil || c.conns.Load() > 0 || c.wrote.Load() || errors.Is(err, context.Canceled) {
		return false
	}
	return c.failed.Load() || beforeConnection(err)
}

// beforeConnection reports whether err is one a request meets only before
// it has a connection to be written on.
func beforeConnection(err error) bool {
	var (
		dns     *net.DNSError
		op      *net.OpError
		record  tls.RecordHeaderError
		alert   tls.AlertError
		verify  *tls.CertificateVerificationError
		unknown x509.UnknownAuthorityError
		host    x509.HostnameError
		invalid x509.CertificateInvalidError
	)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		// Without a connection, the deadline passed while dialing.
		return true
	case errors.As(err, &dns):
		return true
	case errors.As(err, &op) && op.Op == "dial":
		return true
	}
	return errors.As(err, &record) || errors.As(err, &alert) || errors.As(err, &verify) ||
		errors.As(err, &unknown) || errors.As(err, &host) || errors.As(err, &invalid)
}
