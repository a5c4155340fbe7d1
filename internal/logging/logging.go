// Package logging builds the service's JSON logger and carries the request
// id and the idempotency key's hash in the context, so every line about a
// request can be correlated without ever logging the key itself.
package logging

import (
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

type ctxKey struct{}

// Fields are the correlation fields of one request. The request's first
// middleware installs them; later layers fill them in, so the access log
// written at the end sees what the handler learned (the key's hash).
type Fields struct {
	RequestID string
	KeyHash   string
}

// WithFields returns ctx carrying f.
func WithFields(ctx context.Context, f *Fields) context.Context {
	return context.WithValue(ctx, ctxKey{}, f)
}

func fields(ctx context.Context) *Fields {
	f, _ := ctx.Value(ctxKey{}).(*Fields)
	return f
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

// New returns a JSON logger that adds request_id and key_hash from the
// context to every record.
func New(w io.Writer, level slog.Level) *slog.Logger {
	return slog.New(contextHandler{slog.NewJSONHandler(w, &slog.HandlerOptions{Level: level})})
}

type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if f := fields(ctx); f != nil {
		if f.RequestID != "" {
			r.AddAttrs(slog.String("request_id", f.RequestID))
		}
		if f.KeyHash != "" {
			r.AddAttrs(slog.String("key_hash", f.KeyHash))
		}
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
