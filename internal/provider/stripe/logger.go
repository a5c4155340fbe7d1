package stripe

import (
	"context"
	"fmt"
	"log/slog"
)

// callLogger adapts slog to stripe-go's leveled logger for one call: each
// line is stripe-go's template formatted with its arguments, written with
// the call's context so it carries the request, account, payment and
// attempt of the call. stripe-go formats request errors and Stripe's
// messages (which can quote a payment method) into its error lines, so
// error arguments are left out; the adapter's own "stripe call" line says
// what the answer was. Debug and info lines, which include whole
// responses, are discarded.
type callLogger struct {
	l   *slog.Logger
	ctx context.Context
}

func (c callLogger) Debugf(string, ...any) {}
func (c callLogger) Infof(string, ...any)  {}

func (c callLogger) Warnf(format string, args ...any) {
	c.log(slog.LevelWarn, format, args)
}

func (c callLogger) Errorf(format string, args ...any) {
	// stripe-go reports every 4xx here too; our own classification log says
	// what matters, so this stays at debug level.
	c.log(slog.LevelDebug, format, args)
}

func (c callLogger) log(level slog.Level, format string, args []any) {
	if !c.l.Enabled(c.ctx, level) {
		return
	}
	safe := make([]any, len(args))
	for i, a := range args {
		if _, isErr := a.(error); isErr {
			a = "(error omitted)"
		}
		safe[i] = a
	}
	c.l.LogAttrs(c.ctx, level, "stripe-go", slog.String("event", fmt.Sprintf(format, safe...)))
}
