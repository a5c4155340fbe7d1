package provider

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
)

// Send says how a provider key reached the provider in one call.
type Send struct {
	// Recovery: the key may have been sent before (a lease takeover, the
	// reconciler, an ops replay's reconciliation, or the client library's
	// own retry within the call).
	Recovery bool
	// InWindow: the whole call ended inside the key's re-send window, so
	// the provider still remembered the key when it answered.
	InWindow bool
	// Authorize: the operation creates the payment (a card refusal is a
	// decline there, a plain rejection elsewhere).
	Authorize bool
	// PastGrace: for a lookup, PROVIDER_SEARCH_GRACE has passed since the
	// attempt, so an object it made would be visible by now.
	PastGrace bool
}

// Judge decides what an answer proves about the original request of a key
// (CONTRACT §5). It is the only place that turns provider answers into
// outcomes; everything it cannot prove is Unknown, because a guessed
// failure lets the next attempt charge again.
//
//	answer        first send   recovery in window   recovery past window
//	object        succeeded    succeeded            succeeded
//	card error    declined     declined             declined
//	invalid       failed       failed               unknown
//	credentials   failed       unknown              unknown
//	indeterminate unknown      unknown              unknown
//	not found     (lookups)    unknown until PROVIDER_SEARCH_GRACE, then failed
//
// Succeeded means "the object is attached": its state says what happened.
func Judge(a Answer, s Send) Outcome {
	switch a {
	case AnswerObject:
		return Succeeded
	case AnswerNotFound:
		// A lookup is strongly consistent only after the grace: Stripe's
		// search lags writes.
		if s.PastGrace {
			return Failed
		}
	case AnswerCardError:
		// Stored for the key: a replay of the first answer, or the first
		// answer itself.
		if s.Authorize {
			return Declined
		}
		return Failed
	case AnswerInvalid:
		// Within the window the provider would have replayed the first
		// request's stored answer; past it, the key was forgotten and the
		// rejection is about this request only.
		if !s.Recovery || s.InWindow {
			return Failed
		}
	case AnswerCredentials:
		// Credentials are checked before the key is looked up: on a
		// re-send this says nothing about the first request.
		if !s.Recovery {
			return Failed
		}
	}
	return Unknown
}
