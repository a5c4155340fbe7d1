// Package idempotency holds the client key contract: parsing the
// Idempotency-Key header, fingerprinting the normalized request, and the rules
// that decide what a request carrying a known key gets. It knows nothing of
// storage or HTTP; the payment service applies its decisions inside its
// transactions.
package idempotency

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"strings"
	"time"
)

// Operations are the scopes a key is bound to, together with the account.
const (
	OpPaymentsCreate  = "payments.create"
	OpPaymentsCapture = "payments.capture"
	OpPaymentsCancel  = "payments.cancel"
	OpRefundsCreate   = "refunds.create"
	OpAdminReplay     = "admin.replay"
	// OpAdminResolve resolves a discrepancy (CONTRACT §14).
	OpAdminResolve = "admin.discrepancy_resolve"
)

// MaxKeyLength is the longest key accepted.
const MaxKeyLength = 255

var (
	// ErrKeyMissing: no key, or an empty one.
	ErrKeyMissing = errors.New("idempotency key missing")
	// ErrKeyInvalid: a key outside 1–255 visible ASCII characters.
	ErrKeyInvalid = errors.New("idempotency key invalid")
)

// ParseKey validates the header value. The quoted structured-field string of
// the IETF draft ("abc") is the same key as abc.
func ParseKey(header string) (string, error) {
	k := header
	if len(k) >= 2 && k[0] == '"' && k[len(k)-1] == '"' {
		k = k[1 : len(k)-1]
		if strings.ContainsAny(k, `"\`) {
			return "", ErrKeyInvalid
		}
	}
	if k == "" {
		return "", ErrKeyMissing
	}
	if len(k) > MaxKeyLength {
		return "", ErrKeyInvalid
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return "", ErrKeyInvalid
		}
	}
	return k, nil
}

// HashKey is what is stored and logged in place of the key.
func HashKey(key string) []byte {
	h := sha256.Sum256([]byte(key))
	return h[:]
}

// Fingerprint hashes a normalized request. The request must be a value whose
// JSON encoding is canonical: structs with fixed field order and maps, whose
// keys encoding/json sorts. Callers normalize values (defaults, case) before.
func Fingerprint(operation string, normalized any) ([]byte, error) {
	b, err := json.Marshal(normalized)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	h.Write([]byte(operation))
	h.Write([]byte{0})
	h.Write(b)
	return h.Sum(nil), nil
}

// BodyHash hashes the raw bytes of a request that is its body alone (no
// path parameters). The same bytes parse to the same normalized request,
// so a stored hash equal to a retry's stands for an equal fingerprint and
// the retry needs no parsing. Different bytes prove nothing: the retry is
// parsed and its fingerprint compared. It is stored and compared within a
// key's scope, which names the operation already.
func BodyHash(body []byte) []byte {
	h := sha256.Sum256(body)
	return h[:]
}

// DecideBody applies the state table to a known key from the retry's body
// hash alone. ok is false when the hash proves nothing (a key stored
// without one, or other bytes): the caller parses and calls Decide.
func DecideBody(r Record, bodyHash []byte, now time.Time) (d Decision, ok bool) {
	if r.BodyHash == nil || !bytes.Equal(r.BodyHash, bodyHash) {
		return 0, false
	}
	return Decide(r, r.Fingerprint, now), true
}

// Scope identifies a key: unique per account, operation and key hash.
type Scope struct {
	AccountID string
	Operation string
	KeyHash   []byte
}

// State of a key record.
type State string

const (
	StateInProgress State = "in_progress"
	StateUnknown    State = "unknown"
	StateCompleted  State = "completed"
)

// Record is a stored key.
type Record struct {
	ID          int64
	Scope       Scope
	Fingerprint []byte
	// BodyHash is the hash of the raw request bytes (BodyHash); nil for a
	// key stored before it was, or for an operation without one.
	BodyHash       []byte
	State          State
	LeaseExpiresAt *time.Time
	// ResponseKind and ResponseBody are the stored answer of a completed
	// key.
	ResponseKind Kind
	ResponseBody []byte
	PaymentID    string
	AttemptID    string
	CreatedAt    time.Time
	CompletedAt  *time.Time
	Purged       bool
}

// Decision is what a request with a known key gets.
type Decision int

const (
	// Replay the stored response byte for byte.
	Replay Decision = iota + 1
	// ReplayCurrent: the stored response was purged to a tombstone; answer
	// with the current state of the referenced payment, never execute again.
	ReplayCurrent
	// Reused: the key was used for a different request; execute nothing.
	Reused
	// InUse: a live request holds the lease.
	InUse
	// Recover: the outcome is unknown or the holder died; take over recovery
	// of the same attempt with the same provider key.
	Recover
)

// Decide applies the state table to a known key. A different fingerprint
// wins over everything, even while the first request is in flight.
func Decide(r Record, fingerprint []byte, now time.Time) Decision {
	if !bytes.Equal(r.Fingerprint, fingerprint) {
		return Reused
	}
	switch r.State {
	case StateCompleted:
		if r.Purged {
			return ReplayCurrent
		}
		return Replay
	case StateInProgress:
		if r.LeaseExpiresAt != nil && now.Before(*r.LeaseExpiresAt) {
			return InUse
		}
		return Recover
	default:
		return Recover
	}
}

// Kind is what a stored answer says; the api maps it to an HTTP status.
type Kind string

const (
	// KindCreated: the mutation made its object (a payment, a refund), or
	// the replay its new attempt, and the outcome is known.
	KindCreated Kind = "created"
	// KindAccepted: the outcome is not known yet; the body shows the
	// object as it stands.
	KindAccepted Kind = "accepted"
	// KindOK: the change is done; the body is the object.
	KindOK Kind = "ok"
	// KindRefused: nothing was changed; the body is a stored error that
	// carries its code.
	KindRefused Kind = "refused"
)

// Answer is a stored result: replayed with this kind and these bytes.
type Answer struct {
	Kind     Kind
	Body     []byte
	Replayed bool
}
