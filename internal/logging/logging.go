// Package logging builds the service's JSON logger and carries the
// correlation fields of one unit of work (a request, a reconciliation, a
// webhook) in the context: the request id, the idempotency key's hash, and
// the account, payment, attempt and provider as soon as they are known, so
// every line about a payment names it without ever logging the key itself.
package logging

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

type ctxKey struct{}

// Fields are the correlation fields of one unit of work. Its first layer
// installs them (the request id middleware, a background job's loop);
// later layers fill them in, so the access log written at the end sees what
// the handler learned. One unit of work runs on one goroutine, so setting a
// field needs no lock; a loop over payments gives each its own Fields.
type Fields struct {
	RequestID string
	KeyHash   string
	AccountID string
	PaymentID string
	AttemptID string
	Provider  string
}

// WithFields returns ctx carrying f.
func WithFields(ctx context.Context, f *Fields) context.Context {
	return context.WithValue(ctx, ctxKey{}, f)
}

func fields(ctx context.Context) *Fields {
	f, _ := ctx.Value(ctxKey{}).(*Fields)
	return f
}

// Current returns a copy of the fields in ctx (zero without any).
func Current(ctx context.Context) Fields {
	if f := fields(ctx); f != nil {
		return *f
	}
	return Fields{}
}

// RequestID returns the request id in ctx, or "".
func RequestID(ctx context.Context) string {
	if f := fields(ctx); f != nil {
		return f.RequestID
	}
	return ""
}

// SetKeyHash records the hash of the client's idempotency key for every
// later log line of the request.
func SetKeyHash(ctx context.Context, hash []byte) {
	if f := fields(ctx); f != nil {
		f.KeyHash = hex.EncodeToString(hash)
	}
}

// SetAccount names the account of the request (known once it is
// authenticated) on every later line.
func SetAccount(ctx context.Context, accountID string) {
	if f := fields(ctx); f != nil {
		f.AccountID = accountID
	}
}

// WithPayment names the account and the payment on every later line. In
// a unit of work that has no payment yet, or this one, it fills in its
// Fields and returns ctx; otherwise (no Fields, or another payment's) it
// returns a child context with Fields of their own that keep the request id.
func WithPayment(ctx context.Context, accountID, paymentID string) context.Context {
	f := fields(ctx)
	if f == nil || (f.PaymentID != "" && f.PaymentID != paymentID) {
		nf := &Fields{}
		if f != nil {
			nf.RequestID = f.RequestID
		}
		f = nf
		ctx = WithFields(ctx, f)
	}
	f.AccountID, f.PaymentID = accountID, paymentID
	f.AttemptID, f.Provider = "", ""
	return ctx
}

// SetAttempt names the attempt and its provider on every later line of a
// unit of work that carries Fields.
func SetAttempt(ctx context.Context, attemptID, provider string) {
	if f := fields(ctx); f != nil {
		f.AttemptID, f.Provider = attemptID, provider
	}
}

// ParseLevel accepts debug, info, warn and error; "" is info.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("LOG_LEVEL must be debug, info, warn or error, not %q", s)
}

// New returns a JSON logger that adds the context's fields (request_id,
// key_hash, account_id, payment_id, attempt_id, provider) and, when the
// context holds a span, its trace_id and span_id to every record.
func New(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(contextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

type contextHandler struct{ slog.Handler }

// Handle adds each field the record does not already name itself: a
// line about another payment than its context's keeps its own.
func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	// One AddAttrs call, so the record grows its attributes once.
	var add [8]slog.Attr
	n := 0
	// With tracing on, a line leads to its trace and back.
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		add[0], add[1] = slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String())
		n = 2
	}
	if f := fields(ctx); f != nil {
		var named uint8
		r.Attrs(func(a slog.Attr) bool {
			named |= fieldBit(a.Key)
			return true
		})
		for _, c := range [...]struct {
			bit      uint8
			key, val string
		}{{bitRequest, "request_id", f.RequestID}, {bitKey, "key_hash", f.KeyHash}, {bitAccount, "account_id", f.AccountID},
			{bitPayment, "payment_id", f.PaymentID}, {bitAttempt, "attempt_id", f.AttemptID}, {bitProvider, "provider", f.Provider}} {
			if c.val != "" && named&c.bit == 0 {
				add[n] = slog.String(c.key, c.val)
				n++
			}
		}
	}
	if n > 0 {
		r.AddAttrs(add[:n]...)
	}
	return h.Handler.Handle(ctx, r)
}

const (
	bitRequest uint8 = 1 << iota
	bitKey
	bitAccount
	bitPayment
	bitAttempt
	bitProvider
)

func fieldBit(key string) uint8 {
	switch key {
	case "request_id":
		return bitRequest
	case "key_hash":
		return bitKey
	case "account_id":
		return bitAccount
	case "payment_id":
		return bitPayment
	case "attempt_id":
		return bitAttempt
	case "provider":
		return bitProvider
	}
	return 0
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
