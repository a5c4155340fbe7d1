package provider

import "time"

// Replay says what a provider does with one kind of answer it gave to the
// first send of a key, when the same key is sent again.
type Replay int

const (
	// NotStored: the answer is not kept for the key. A re-send is run or
	// refused afresh, so on a recovery the answer says nothing about the
	// first send.
	NotStored Replay = iota
	// StoredWhileKept: the answer is kept for the key and replayed to a
	// re-send while the provider keeps the key (Profile.KeyRetention); past
	// it the answer is about the re-send alone.
	StoredWhileKept
	// StoredForGood: on any recovery the answer is taken as the first
	// send's, provided the provider keeps keys at all (the service never
	// re-sends a key past its window, so a recovery that meets it is a
	// replay).
	StoredForGood
)

// Profile is a provider's idempotency contract (CONTRACT §5, §15): what
// Judge may conclude from its answers and when the service may re-send one
// of its keys.
type Profile struct {
	// Name is the provider's name (stripe, mercadopago).
	Name string
	// KeyRetention is how long the provider keeps a key. Zero: it keeps
	// none the service may count on, so a key is never re-sent for
	// recovery (only looked up) and nothing is ever a replay.
	KeyRetention time.Duration
	// Stores says, per answer, whether the provider keeps it for the key
	// and replays it; an answer it does not name is NotStored. An object
	// is proof on its own and an indeterminate answer never is, whatever
	// is stored.
	Stores map[Answer]Replay
	// CredentialsFirst: the provider checks credentials (and permissions)
	// before it looks the key up or acts, so a refusal of them on a first
	// send proves nothing ran, and on a re-send proves nothing.
	CredentialsFirst bool
	// SearchLag is how long the provider's lookups may lag its writes
	// (PROVIDER_SEARCH_GRACE, MERCADOPAGO_SEARCH_GRACE): a lookup that finds
	// nothing proves no effect only after it.
	SearchLag time.Duration
	// RefundMetadata: the provider keeps a refund's metadata, so a lookup
	// that finds no refund carrying the service's refund id proves none
	// was made. Mercado Pago keeps none.
	RefundMetadata bool
}

// Defaults of the providers' profiles.
const (
	// StripeKeyRetention: Stripe documents that it keeps keys 24 hours.
	StripeKeyRetention = 24 * time.Hour
	// MercadoPagoKeyRetention: Mercado Pago does not document how long it
	// keeps an X-Idempotency-Key, so the service counts on nothing.
	MercadoPagoKeyRetention = time.Duration(0)
	// DefaultSearchLag is the default search grace of both providers.
	DefaultSearchLag = 5 * time.Minute
)

// StripeProfile is Stripe's contract. Stripe saves the status and body of
// the first request made with a key once an endpoint began executing; the
// judge relies on no more than this:
//   - the object (success): proof on any send;
//   - a 402 card error: kept for the key (the declined PaymentIntent
//     exists), taken as the stored decline on any recovery;
//   - a 400/404 invalid request (not an idempotency error): replayed while
//     Stripe keeps the key; past it, about the re-send alone;
//   - 401/403: credentials are checked before the key, never stored;
//   - 409, idempotency errors, 429, 5xx: never trusted, stored or not.
func StripeProfile(retention, searchLag time.Duration) Profile {
	return Profile{
		Name:         "stripe",
		KeyRetention: retention,
		Stores: map[Answer]Replay{
			AnswerObject:    StoredWhileKept,
			AnswerCardError: StoredForGood,
			AnswerInvalid:   StoredWhileKept,
		},
		CredentialsFirst: true,
		SearchLag:        searchLag,
		RefundMetadata:   true,
	}
}

// MercadoPagoProfile is Mercado Pago's contract (CONTRACT §15). It
// documents that a repeated X-Idempotency-Key gets the first request's
// answer, but neither for how long (retention defaults to 0: keys are never
// re-sent for recovery, only looked up by retrieve or by a search on
// external_reference) nor for which errors. A card refusal is a payment
// it keeps (status rejected), so it is trusted while the key is kept; an
// invalid request is never taken as a replay. Its API checks the access
// token before anything else (a refused token on a first send proves
// nothing ran, the failover of §15).
func MercadoPagoProfile(retention, searchLag time.Duration) Profile {
	return Profile{
		Name:         "mercadopago",
		KeyRetention: retention,
		Stores: map[Answer]Replay{
			AnswerObject:    StoredWhileKept,
			AnswerCardError: StoredWhileKept,
		},
		CredentialsFirst: true,
		SearchLag:        searchLag,
	}
}

// replayed reports whether an answer to a recovery is the stored answer of
// the first send.
func (p Profile) replayed(a Answer, inWindow bool) bool {
	if p.KeyRetention <= 0 {
		// A provider that keeps no key replays nothing.
		return false
	}
	switch p.Stores[a] {
	case StoredForGood:
		return true
	case StoredWhileKept:
		return inWindow
	}
	return false
}
