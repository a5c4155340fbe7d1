package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

const (
	// readHeaderTimeout caps the headers alone below HTTP_READ_TIMEOUT: a
	// client that has not sent its headers in this time is not a client.
	readHeaderTimeout = 10 * time.Second
)

// checkHTTP parses HTTP_MAX_HEADER_BYTES and checks that a request's
// response can be written in time: the write deadline runs from the end
// of the headers and must cover the provider call plus the database work
// around it (DB_STATEMENT_TIMEOUT as its measure). A shorter one cuts the
// answer of a payment that went through, and the client learns it only by
// retrying.
func (c *config) checkHTTP(maxHeader string) error {
	n, err := strconv.Atoi(maxHeader)
	if err != nil || n < 1<<10 || n > 16<<20 {
		return fmt.Errorf("HTTP_MAX_HEADER_BYTES must be a number of bytes between 1024 and 16777216, not %q", maxHeader)
	}
	c.HTTPMaxHeaderBytes = n
	if need := c.ProviderTimeout + c.DBStatementTimeout; c.HTTPWriteTimeout <= need {
		return fmt.Errorf("HTTP_WRITE_TIMEOUT (%s) must be longer than PROVIDER_TIMEOUT plus DB_STATEMENT_TIMEOUT (%s)",
			c.HTTPWriteTimeout, need)
	}
	return nil
}

// newHTTPServer bounds every connection: the whole request (headers and
// body) must arrive within HTTP_READ_TIMEOUT, the answer within
// HTTP_WRITE_TIMEOUT, and a kept-alive connection with no request is
// closed after HTTP_IDLE_TIMEOUT. Without them a body sent one byte at a
// time, or idle keep-alive connections, hold a connection for ever.
func newHTTPServer(cfg config, h http.Handler) *http.Server {
	return &http.Server{
		Handler:           boundRequests(h, cfg.HTTPWriteTimeout),
		ReadHeaderTimeout: min(readHeaderTimeout, cfg.HTTPReadTimeout),
		ReadTimeout:       cfg.HTTPReadTimeout,
		WriteTimeout:      cfg.HTTPWriteTimeout,
		IdleTimeout:       cfg.HTTPIdleTimeout,
		MaxHeaderBytes:    cfg.HTTPMaxHeaderBytes,
	}
}

// boundRequests gives each request a deadline just short of the write
// timeout. DB_STATEMENT_TIMEOUT is enforced by the server, so it cannot end
// a round trip the network lost or stalled: without a deadline of its own
// the request waits for ever, and an answer after the write timeout could
// not be written anyway. At the deadline a database call fails as
// unavailable (503) and a provider call as unknown; the work that records
// a provider's answer runs on its own bounded context.
func boundRequests(h http.Handler, write time.Duration) http.Handler {
	bound := write - min(time.Second, write/10)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), bound)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}
