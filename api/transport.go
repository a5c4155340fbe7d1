package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/go-chi/chi/v5"
)

// statusClientClosed is the status recorded for a request whose client went
// away before the answer (nginx's 499): nothing was sent, so it is neither
// the service's error nor the client's mistake.
const statusClientClosed = 499

// methodLabels is the fixed set of method label values; anything else is
// "other", so made-up methods cannot create new series.
var methodLabels = map[string]string{
	http.MethodGet: http.MethodGet, http.MethodHead: http.MethodHead, http.MethodPost: http.MethodPost,
	http.MethodPut: http.MethodPut, http.MethodPatch: http.MethodPatch, http.MethodDelete: http.MethodDelete,
	http.MethodOptions: http.MethodOptions, http.MethodConnect: http.MethodConnect, http.MethodTrace: http.MethodTrace,
}

// methodLabel is the method as a metric label or log field.
func methodLabel(method string) string {
	if m, ok := methodLabels[method]; ok {
		return m
	}
	return "other"
}

// routeUnmatched is the one route label of every request no route matched.
const routeUnmatched = "unmatched"

// clientGone reports whether the client closed the connection: net/http
// cancels the request's context when a read from the connection fails or
// finds it closed. A deadline that passed is the server's own bound on the
// request, not the client leaving: its answer is still read.
func clientGone(r *http.Request) bool { return errors.Is(r.Context().Err(), context.Canceled) }

// singleHeader returns the value of a field that must appear at most once:
// ok is false when the request carries it on more than one line, even with
// equal values, since a client that sends two cannot know which one counts.
func singleHeader(h http.Header, name string) (value string, ok bool) {
	vs := h.Values(name)
	switch len(vs) {
	case 0:
		return "", true
	case 1:
		return vs[0], true
	}
	return "", false
}

// allowedMethods lists the methods the router serves for path, in a fixed
// order, with HEAD wherever GET is served.
func allowedMethods(root chi.Routes, methods []string, path string) []string {
	var out []string
	for _, m := range methods {
		if root.Match(chi.NewRouteContext(), m, path) {
			out = append(out, m)
			if m == http.MethodGet {
				out = append(out, http.MethodHead)
			}
		}
	}
	return out
}

// routedMethods is every method some route of root serves.
func routedMethods(root chi.Routes) []string {
	seen := map[string]bool{}
	_ = chi.Walk(root, func(method, _ string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		seen[method] = true
		return nil
	})
	var out []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if seen[m] {
			out = append(out, m)
		}
	}
	return out
}
