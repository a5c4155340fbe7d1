package provider

import "time"

// Answer is what a provider's reply shows, before anyone decides what it
// proves. Adapters map their wire errors onto these kinds and nothing more.
type Answer string

const (
	// AnswerObject: the provider returned the object (success, or the
	// stored result of the key).
	AnswerObject Answer = "object"
	// AnswerCardError: the card was refused (Stripe's 402 card_error). The
	// provider stores it for the key and replays it.
	AnswerCardError Answer = "card_error"
	// AnswerInvalid: the request was rejected as invalid (400/404), not an
	// idempotency error.
	AnswerInvalid Answer = "invalid_request"
	// AnswerCredentials: the credentials or their permissions were refused
	// (401/403). The provider checks them before it looks the key up.
	AnswerCredentials Answer = "credentials"
	// AnswerIndeterminate: 409, an idempotency error, 429, 5xx, a timeout,
	// a lost connection, or anything unclear.
	AnswerIndeterminate Answer = "indeterminate"
	// AnswerNotFound: a lookup (retrieve, list, search) found no object.
	AnswerNotFound Answer = "not_found"
	// AnswerUnreachable: no send of the call wrote a byte of the request.
	// The name did not resolve, the dial failed or timed out, or the TLS
	// handshake failed, and no try of the call (the client library's own
	// retries included) ever had a connection to write on. A fact of the
	// transport (see package reach), never inferred from an error's text.
	AnswerUnreachable Answer = "unreachable"
)

// Send says how a provider key reached the provider in one call.
type Send struct {
	// Recovery: the key may have been sent before (a lease takeover, the
	// reconciler, an ops replay's reconciliation, or the client library's
	// own retry within the call).
	Recovery bool
	// InWindow: the whole call ended inside the key's re-send window, so
	// the provider still remembered the key when it answered (never so for
	// a profile without KeyRetention).
	InWindow bool
	// Authorize: the operation creates the payment (a card refusal is a
	// decline there, a plain rejection elsewhere).
	Authorize bool
	// Since: for a lookup, how long after the attempt was created it ran;
	// from the profile's SearchLag on, an object the attempt made would be
	// visible.
	Since time.Duration
}

// Judge decides what an answer proves about the original request of a key
// (CONTRACT §5, §15), by the provider's profile. It is the only place that
// turns provider answers into outcomes; everything it cannot prove is
// Unknown, because a guessed failure lets the next attempt charge again.
// For Stripe's profile:
//
//	answer        first send   recovery in window   recovery past window
//	object        succeeded    succeeded            succeeded
//	card error    declined     declined             declined
//	invalid       failed       failed               unknown
//	credentials   failed       unknown              unknown
//	indeterminate unknown      unknown              unknown
//	unreachable   failed       unknown              unknown
//	not found     (lookups)    unknown until the profile's SearchLag, then failed
//
// Unreachable is the same for every profile: this call wrote nothing, so
// on a first send nothing ran; on a recovery an earlier send may have.
//
// A recovery is in window only while the provider keeps the key; an answer
// the profile does not store is, on a recovery, unknown.
//
// Succeeded means "the object is attached": its state says what happened.
func Judge(p Profile, a Answer, s Send) Outcome {
	switch a {
	case AnswerObject:
		return Succeeded
	case AnswerNotFound:
		// A lookup is strongly consistent only after the search lag.
		if s.Since >= p.SearchLag {
			return Failed
		}
	case AnswerCardError:
		// The first answer itself, or a replay of it.
		if !s.Recovery || p.replayed(a, s.InWindow) {
			if s.Authorize {
				return Declined
			}
			return Failed
		}
	case AnswerInvalid:
		// Replayed, the rejection is the first request's; not, it is about
		// this request only.
		if !s.Recovery || p.replayed(a, s.InWindow) {
			return Failed
		}
	case AnswerCredentials:
		// Checked before the key is looked up: on a re-send this says
		// nothing about the first request.
		if !s.Recovery && p.CredentialsFirst {
			return Failed
		}
	case AnswerUnreachable:
		if !s.Recovery {
			return Failed
		}
	}
	return Unknown
}
