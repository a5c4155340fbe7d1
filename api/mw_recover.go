package api

import (
	"fmt"
	"log/slog"
	"net/http"
)

// recoverPanic answers a handler's panic as an internal error, logged with
// the request id. http.ErrAbortHandler is net/http's own way to abort a
// response and goes on up.
func recoverPanic(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				if v := recover(); v != nil {
					if v == http.ErrAbortHandler {
						panic(v)
					}
					writeProblem(log, w, r, fmt.Errorf("panic: %v", v))
				}
			}()
			next.ServeHTTP(w, r)
		})
	}
}
