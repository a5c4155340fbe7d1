package providersim

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"
)

// idemEntry is one idempotency key of one secret key. While !done the first
// request is still executing.
type idemEntry struct {
	fingerprint string
	created     time.Time
	done        bool
	mp          bool // a Mercado Pago key, kept for the Mercado Pago retention
	res         result
}

type claimState int

const (
	claimNew      claimState = iota // the caller now owns the key and must settle it
	claimReplay                     // res is the stored answer
	claimRejected                   // res is an idempotency error
)

// claim looks the key up and, when unknown or expired, reserves it for the
// caller.
func (s *Server) claim(key, idemKey, fp string, mp bool) (*idemEntry, result, claimState) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := s.account(key)
	now := s.now()
	if now.Sub(a.swept) > time.Minute {
		for k, e := range a.keys {
			if s.expired(e, now) {
				delete(a.keys, k)
			}
		}
		a.swept = now
	}

	e := a.keys[idemKey]
	switch {
	case e == nil || s.expired(e, now):
		e = &idemEntry{fingerprint: fp, created: now, mp: mp}
		a.keys[idemKey] = e
		return e, result{}, claimNew
	case mp:
		return mpClaimAnswer(e, fp, idemKey)
	case e.fingerprint != fp:
		return nil, failed(http.StatusBadRequest, &apiError{Type: idempotencyError,
			Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. Try using a key other than '" + idemKey + "' if you meant to execute a different request."}), claimRejected
	case !e.done:
		return nil, failed(http.StatusConflict, &apiError{Type: idempotencyError,
			Message: "There is currently another in-progress request using this Idempotent Key (that probably means you submitted twice, and the other request is still going through): " + idemKey + ". Please try again later."}), claimRejected
	default:
		return e, e.res, claimReplay
	}
}

// expired reports whether a completed key is past retention; a key whose
// request is still running is never forgotten by age.
func (s *Server) expired(e *idemEntry, now time.Time) bool {
	retention := s.opts.KeyRetention
	if e.mp {
		retention = s.mp.retention
	}
	return e.done && now.Sub(e.created) >= retention
}

// unclaim frees a key reserved by claim whose request stored nothing.
func (s *Server) unclaim(key, idemKey string, e *idemEntry) {
	if e == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.account(key).release(idemKey, e)
}

// release deletes the entry unless it was already forgotten and reused.
// Requires s.mu.
func (a *account) release(idemKey string, e *idemEntry) {
	if a.keys[idemKey] == e {
		delete(a.keys, idemKey)
	}
}

// fingerprint hashes what Stripe compares on reuse of a key: the endpoint and
// the parameters (url.Values.Encode sorts them).
func fingerprint(r *http.Request) string {
	return fingerprintOf(r.Method + " " + r.URL.Path + "?" + r.Form.Encode())
}

func fingerprintOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}
