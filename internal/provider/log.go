package provider

import (
	"context"
	"log/slog"
)

// LogCall logs one adapter call and what its answer was: a warning when
// the answer proves nothing, the credentials were refused or the provider
// could not be reached, debug
// otherwise. msg names the adapter's call ("stripe call").
func LogCall(ctx context.Context, log *slog.Logger, msg, op, intentID string, a Answer, code string, err error) {
	level := slog.LevelDebug
	if a == AnswerIndeterminate || a == AnswerCredentials || a == AnswerUnreachable {
		level = slog.LevelWarn
	}
	attrs := []slog.Attr{slog.String("op", op), slog.String("answer", string(a))}
	if intentID != "" {
		attrs = append(attrs, slog.String("intent_id", intentID))
	}
	if code != "" {
		attrs = append(attrs, slog.String("code", code))
	}
	if err != nil {
		attrs = append(attrs, slog.String("err", err.Error()))
	}
	log.LogAttrs(ctx, level, msg, attrs...)
}
