package stripe

import (
	"context"
	"log/slog"
)

// quietLogger adapts slog to stripe-go's leveled logger. stripe-go formats
// request errors and response bodies into its messages, so only the format
// template is kept and the arguments are dropped; debug and info lines
// (which include whole responses) are discarded.
type quietLogger struct {
	l *slog.Logger
}

func (q quietLogger) Debugf(string, ...any) {}
func (q quietLogger) Infof(string, ...any)  {}

func (q quietLogger) Warnf(format string, _ ...any) {
	q.l.LogAttrs(context.Background(), slog.LevelWarn, "stripe-go", slog.String("event", format))
}

func (q quietLogger) Errorf(format string, _ ...any) {
	// stripe-go reports every 4xx here too; our own classification log says
	// what matters, so this stays at debug level.
	q.l.LogAttrs(context.Background(), slog.LevelDebug, "stripe-go", slog.String("event", format))
}
