package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/acmepay/payments/internal/payment"
)

// defaultBodyBudget bounds the bytes of provider webhook bodies the
// service holds at once, across all requests: 16 bodies of the largest
// size, thousands of real events (a few KiB each, always sent with a
// Content-Length).
const defaultBodyBudget = 16 << 20

// errBudgetExhausted answers a body the budget cannot take now: 503 with
// Retry-After, never a bigger heap.
var errBudgetExhausted = payment.Errorf(payment.CodeUnavailable, "too many requests are being read; retry later")

// readBudgeted reads a body of at most limit bytes. It reserves the body's
// declared size (limit when it declares none) from the server's budget
// before reading a byte, without waiting, and reads into a buffer of
// exactly that size, so what is held never exceeds what was reserved.
// release returns the reservation once the body is no longer used.
func (s *Server) readBudgeted(w http.ResponseWriter, r *http.Request, limit int64) (body []byte, release func(), err error) {
	if r.ContentLength > limit {
		return nil, nil, payment.Errorf(payment.CodeRequestTooLarge, "the body must be at most %d bytes", limit)
	}
	n := r.ContentLength
	if n < 0 {
		n = limit
	}
	if !s.bodies.TryAcquire(n) {
		return nil, nil, errBudgetExhausted
	}
	release = func() { s.bodies.Release(n) }
	body, err = readAtMost(w, r, n, limit)
	if err != nil {
		release()
		return nil, nil, err
	}
	return body, release, nil
}

// readAtMost reads the body into a buffer of n bytes, refusing one longer
// than limit.
func readAtMost(w http.ResponseWriter, r *http.Request, n, limit int64) ([]byte, error) {
	lr := http.MaxBytesReader(w, r.Body, limit)
	buf := make([]byte, n)
	got, err := io.ReadFull(lr, buf)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return buf[:got], nil
	case errors.As(err, &tooLarge):
		return nil, payment.Errorf(payment.CodeRequestTooLarge, "the body must be at most %d bytes", limit)
	case err != nil:
		return nil, payment.Errorf(payment.CodeInvalidRequest, "the body could not be read")
	}
	// The buffer is full: anything more is over the limit.
	var one [1]byte
	if m, err := lr.Read(one[:]); m > 0 || (err != nil && !errors.Is(err, io.EOF)) {
		if errors.As(err, &tooLarge) || m > 0 {
			return nil, payment.Errorf(payment.CodeRequestTooLarge, "the body must be at most %d bytes", limit)
		}
		return nil, payment.Errorf(payment.CodeInvalidRequest, "the body could not be read")
	}
	return buf, nil
}
