// Package providertest is the conformance suite for provider.Provider: what
// each call answers, which states it reports, what its effects are and what
// provider.Judge makes of the answers, by the adapter's own profile. Each
// backend's package runs it with its own Harness, as River's drivers run
// riverdrivertest: the Stripe and Mercado Pago adapters against the
// simulator (internal/provider/providersim) and the Stripe adapter against
// stripe-mock (internal/provider/stripe).
package providertest

import (
	"context"
	"crypto/rand"
	"errors"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// Harness is what the suite needs from one provider under test.
type Harness struct {
	// Provider is the adapter under test, talking to the backend.
	Provider provider.Provider
	// Credentials are accepted by the backend.
	Credentials provider.Credentials
	// Stateful: the backend keeps objects and honours idempotency keys (the
	// simulator). False for stripe-mock, which answers every request from
	// fixtures; subtests whose assertions need state skip there.
	Stateful bool
	// Effects counts what the backend did for Credentials; required when
	// Stateful, so the suite can prove a call had one effect or none.
	Effects func() Effects
	// RevokeCredentials, when set, makes the credentials answer 401 until
	// restored.
	RevokeCredentials func() (restore func())
	// ProviderAt returns the adapter configured as Provider but sending to
	// baseURL; the suite points it at a closed port.
	ProviderAt func(baseURL string) provider.Provider
	// Fixtures are the provider's own test cards, ids and lookups.
	Fixtures Fixtures
}

// Fixtures are what the suite's requests and expectations need to know of
// one provider's API.
type Fixtures struct {
	// Card sets the payment method of req: a test card the issuer
	// approves, or, when declined, one it refuses.
	Card func(req *provider.AuthorizeRequest, declined bool)
	// DeclineCode is the failure code of the refused card.
	DeclineCode string
	// MissingID is an intent id of the provider's own form that names no
	// object; run is unique to the subtest.
	MissingID func(run string) string
	// SearchRef is what SearchIntentByPaymentID takes to find the intent
	// authorized with metadata payment_id paymentID and attempt "1".
	SearchRef func(paymentID string) string
	// RefundMetadata: the provider keeps a refund's metadata, so refunds
	// can be told apart by it.
	RefundMetadata bool
	// DeclineStaysOpen: a declined payment awaits another payment method
	// until it is canceled; false where a refusal is final.
	DeclineStaysOpen bool
}

// StripeFixtures are Stripe's test payment methods (pm_card_…) and
// PaymentIntent ids; Stripe searches by metadata payment_id.
var StripeFixtures = Fixtures{
	Card: func(req *provider.AuthorizeRequest, declined bool) {
		req.PaymentMethod = "pm_card_visa"
		if declined {
			req.PaymentMethod = "pm_card_chargeDeclined"
		}
	},
	DeclineCode:      "generic_decline",
	MissingID:        func(run string) string { return "pi_" + run },
	SearchRef:        func(paymentID string) string { return paymentID },
	RefundMetadata:   true,
	DeclineStaysOpen: true,
}

// Effects counts the backend's effects on money, as the simulator does.
type Effects struct {
	Authorizations int // intents authorized or charged
	Declines       int
	Captures       int
	Cancels        int
	Refunds        int
}

func (e Effects) sub(o Effects) Effects {
	return Effects{
		Authorizations: e.Authorizations - o.Authorizations,
		Declines:       e.Declines - o.Declines,
		Captures:       e.Captures - o.Captures,
		Cancels:        e.Cancels - o.Cancels,
		Refunds:        e.Refunds - o.Refunds,
	}
}

// The sends Judge distinguishes (its table's columns).
var (
	firstSend      = provider.Send{}
	recoveryIn     = provider.Send{Recovery: true, InWindow: true}
	recoveryPast   = provider.Send{Recovery: true}
	authorizeFirst = provider.Send{Authorize: true}
	authorizeIn    = provider.Send{Authorize: true, Recovery: true, InWindow: true}
	authorizePast  = provider.Send{Authorize: true, Recovery: true}
)

const amount = 1000

// Run runs the suite. newHarness is called once per subtest, which may run
// in parallel with the others; keys and payment ids are unique per subtest,
// so harnesses may share one backend.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()

	authorizeTests(t, newHarness)
	repeatTests(t, newHarness)
	captureCancelTests(t, newHarness)
	invalidStateTests(t, newHarness)
	refundTests(t, newHarness)
	lookupTests(t, newHarness)
	credentialTests(t, newHarness)
	transportTests(t, newHarness)
}

// authorizeTests runs the subtests of a first authorization, held or
// captured.
func authorizeTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("AuthorizeManualAnswersIntent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		req := s.authorizeRequest(approvedCard, "manual")
		before := s.effects()
		res := s.Provider.Authorize(s.ctx, s.Credentials, req)
		s.wantAnswer(res, provider.AnswerObject)
		s.wantJudged(res.Answer, authorizeFirst, provider.Succeeded)
		in := s.wantIntent(res)
		if in.Amount != amount || in.Currency != "brl" || in.CaptureMethod != "manual" {
			t.Fatalf("intent = %+v, want %d brl manual", *in, amount)
		}
		s.stateful("HoldsFundsWithMetadata", "its fixture intent has status requires_payment_method and no metadata", func(s *suite) {
			if in.State != provider.IntentAuthorized || in.AmountCapturable != amount || in.AmountReceived != 0 {
				s.t.Fatalf("intent = %+v, want authorized with %d capturable", *in, amount)
			}
			if !maps.Equal(in.Metadata, req.Metadata) {
				s.t.Fatalf("metadata = %v, want %v", in.Metadata, req.Metadata)
			}
			got := s.retrieve(in.ID)
			if got.State != provider.IntentAuthorized || !maps.Equal(got.Metadata, req.Metadata) {
				s.t.Fatalf("retrieved %+v, want authorized with metadata %v", *got, req.Metadata)
			}
			s.wantEffects(before, Effects{Authorizations: 1})
		})
	})

	t.Run("AuthorizeAutomaticAnswersIntent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		before := s.effects()
		res := s.Provider.Authorize(s.ctx, s.Credentials, s.authorizeRequest(approvedCard, "automatic"))
		s.wantAnswer(res, provider.AnswerObject)
		s.wantJudged(res.Answer, authorizeFirst, provider.Succeeded)
		in := s.wantIntent(res)
		if in.CaptureMethod != "automatic" {
			t.Fatalf("capture method = %q, want automatic", in.CaptureMethod)
		}
		s.stateful("Captures", "its fixture intent has status requires_payment_method", func(s *suite) {
			if in.State != provider.IntentCaptured || in.AmountReceived != amount || in.AmountCapturable != 0 {
				s.t.Fatalf("intent = %+v, want captured with %d received", *in, amount)
			}
			s.wantEffects(before, Effects{Authorizations: 1})
		})
	})
}

// repeatTests runs the subtests of a decline and of authorizations sent
// again with one key.
func repeatTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("AuthorizeDeclinedCardIsCardError", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it never declines: every create answers its fixture intent")
		req := s.authorizeRequest(declinedCard, "manual")
		before := s.effects()
		res := s.Provider.Authorize(s.ctx, s.Credentials, req)
		s.wantAnswer(res, provider.AnswerCardError)
		if code := s.Fixtures.DeclineCode; res.FailureCode != code || res.FailureMessage == "" {
			t.Fatalf("failure = %q %q, want %s with a message", res.FailureCode, res.FailureMessage, code)
		}
		// A refusal proves a decline on a first send, and on a recovery as
		// far as the profile stores it for the key (Stripe: on every send).
		for _, send := range []provider.Send{authorizeFirst, authorizeIn, authorizePast} {
			s.wantJudged(res.Answer, send, s.storedOutcome(res.Answer, send, provider.Declined))
		}
		in := s.wantIntent(res)
		if in.State != provider.IntentNeedsPaymentMethod || in.AmountCapturable != 0 || in.AmountReceived != 0 {
			t.Fatalf("declined intent = %+v, want needs_payment_method holding nothing", *in)
		}
		if !maps.Equal(in.Metadata, req.Metadata) {
			t.Fatalf("declined intent metadata = %v, want %v", in.Metadata, req.Metadata)
		}
		s.wantEffects(before, Effects{Declines: 1})

		s.keysKept("ResendReplaysDecline", func(s *suite) {
			again := s.Provider.Authorize(s.ctx, s.Credentials, req)
			s.wantAnswer(again, provider.AnswerCardError)
			if again.Intent == nil || again.Intent.ID != in.ID || again.FailureCode != res.FailureCode {
				s.t.Fatalf("re-send = %+v, want the stored decline of %s", again, in.ID)
			}
			s.wantEffects(before, Effects{Declines: 1})
		})
	})

	t.Run("AuthorizeSameKeyReturnsSameIntent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it makes a new intent for every create and remembers no key")
		s.needKeys()
		req := s.authorizeRequest(approvedCard, "manual")
		before := s.effects()
		first := s.Provider.Authorize(s.ctx, s.Credentials, req)
		s.wantAnswer(first, provider.AnswerObject)
		again := s.Provider.Authorize(s.ctx, s.Credentials, req)
		s.wantAnswer(again, provider.AnswerObject)
		s.wantJudged(again.Answer, authorizeIn, provider.Succeeded)
		if a, b := s.wantIntent(first).ID, s.wantIntent(again).ID; a != b {
			t.Fatalf("re-send answered intent %s, first send %s", b, a)
		}
		s.wantEffects(before, Effects{Authorizations: 1})
	})

	t.Run("SameKeyOtherParamsIsIndeterminate", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it remembers no key, so nothing conflicts")
		s.needKeys()
		req := s.authorizeRequest(approvedCard, "manual")
		s.wantAnswer(s.Provider.Authorize(s.ctx, s.Credentials, req), provider.AnswerObject)
		before := s.effects()
		other := req
		other.Amount = amount + 1
		res := s.Provider.Authorize(s.ctx, s.Credentials, other)
		// An idempotency error says nothing about the key's first request.
		s.wantAnswer(res, provider.AnswerIndeterminate)
		s.wantJudged(res.Answer, authorizeFirst, provider.Unknown)
		s.wantEffects(before, Effects{})
	})
}

// captureCancelTests runs the subtests of capturing a hold, in full or in
// part, and of canceling it.
func captureCancelTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("CaptureAnswersIntent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		in := s.authorized("manual")
		before := s.effects()
		res := s.Provider.Capture(s.ctx, s.Credentials, provider.CaptureRequest{IdempotencyKey: s.key("capture"), IntentID: in.ID})
		got := s.wantActedOn(res, in, "captured")
		s.stateful("TakesAuthorizedFunds", "its fixture intent has status requires_payment_method after a capture", func(s *suite) {
			if got.State != provider.IntentCaptured || got.AmountReceived != amount || got.AmountCapturable != 0 {
				s.t.Fatalf("captured intent = %+v, want captured with %d received", *got, amount)
			}
			s.wantEffects(before, Effects{Captures: 1})
		})
	})

	t.Run("CapturePartialAnswersIntent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		in := s.authorized("manual")
		res := s.Provider.Capture(s.ctx, s.Credentials, provider.CaptureRequest{IdempotencyKey: s.key("capture"), IntentID: in.ID, Amount: 600})
		s.wantAnswer(res, provider.AnswerObject)
		got := s.wantIntent(res)
		s.stateful("ReleasesRest", "its fixture intent has status requires_payment_method after a capture", func(s *suite) {
			if got.State != provider.IntentCaptured || got.AmountReceived != 600 || got.AmountCapturable != 0 {
				s.t.Fatalf("captured intent = %+v, want captured with 600 received and nothing capturable", *got)
			}
		})
	})

	t.Run("CancelAnswersIntent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		in := s.authorized("manual")
		before := s.effects()
		res := s.Provider.Cancel(s.ctx, s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: in.ID})
		got := s.wantActedOn(res, in, "canceled")
		s.stateful("ReleasesFunds", "its fixture intent has status requires_payment_method after a cancel", func(s *suite) {
			if got.State != provider.IntentCanceled || got.AmountCapturable != 0 || got.AmountReceived != 0 {
				s.t.Fatalf("canceled intent = %+v, want canceled holding nothing", *got)
			}
			s.wantEffects(before, Effects{Cancels: 1})
		})
	})
}

// invalidStateTests runs the subtests of captures and cancels of intents
// holding no funds: canceled, captured or declined.
func invalidStateTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("CaptureOfCanceledIsInvalid", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it captures any intent id, whatever happened to it")
		in := s.authorized("manual")
		s.wantAnswer(s.Provider.Cancel(s.ctx, s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: in.ID}), provider.AnswerObject)
		before := s.effects()
		res := s.Provider.Capture(s.ctx, s.Credentials, provider.CaptureRequest{IdempotencyKey: s.key("capture"), IntentID: in.ID})
		s.wantAnswer(res, provider.AnswerInvalid)
		if res.FailureCode == "" {
			t.Fatal("invalid answer without a failure code")
		}
		// A rejection proves a failure on a first send, and on a recovery
		// as far as the profile stores it (Stripe: while it keeps the key).
		for _, send := range []provider.Send{firstSend, recoveryIn, recoveryPast} {
			s.wantJudged(res.Answer, send, s.storedOutcome(res.Answer, send, provider.Failed))
		}
		s.wantEffects(before, Effects{})
		if got := s.retrieve(in.ID); got.State != provider.IntentCanceled {
			t.Fatalf("intent after refused capture = %+v, want still canceled", *got)
		}
	})

	t.Run("CancelOfCapturedIsInvalid", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it cancels any intent id, whatever happened to it")
		in := s.authorized("automatic")
		before := s.effects()
		res := s.Provider.Cancel(s.ctx, s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: in.ID})
		s.wantAnswer(res, provider.AnswerInvalid)
		s.wantJudged(res.Answer, firstSend, provider.Failed)
		s.wantEffects(before, Effects{})
		if got := s.retrieve(in.ID); got.State != provider.IntentCaptured {
			t.Fatalf("intent after refused cancel = %+v, want still captured", *got)
		}
	})

	t.Run("CancelOfDeclinedCancelsIt", func(t *testing.T) { cancelOfDeclined(t, newHarness) })
	t.Run("CancelOfFinalDeclineIsInvalid", func(t *testing.T) { cancelOfFinalDecline(t, newHarness) })
}

// refundTests runs the subtests of a refund and of the refunds the
// provider refuses.
func refundTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("RefundAnswersRefund", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		in := s.authorized("automatic")
		md := map[string]string{"payment_id": s.paymentID, "refund_id": s.run + "-r1"}
		before := s.effects()
		res := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund"), IntentID: in.ID, Amount: 300, Metadata: md})
		s.wantRefundAnswer(res, provider.AnswerObject)
		s.wantJudged(res.Answer, firstSend, provider.Succeeded)
		rf := res.Refund
		if rf == nil || rf.ID == "" {
			t.Fatalf("refund = %+v, want one with an id", rf)
		}
		if rf.Amount != 300 || !made(rf.State) {
			t.Fatalf("refund = %+v, want 300 succeeded or pending", *rf)
		}
		s.stateful("KeepsMetadata", "its fixture refund carries no metadata", func(s *suite) {
			s.wantEffects(before, Effects{Refunds: 1})
			s.needRefundMetadata()
			if !maps.Equal(rf.Metadata, md) {
				s.t.Fatalf("refund metadata = %v, want %v", rf.Metadata, md)
			}
		})
	})

	t.Run("RefundBeyondCapturedIsInvalid", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it refunds any amount of any intent id")
		in := s.authorized("automatic")
		before := s.effects()
		res := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund"), IntentID: in.ID, Amount: amount + 1})
		s.wantRefundAnswer(res, provider.AnswerInvalid)
		s.wantJudged(res.Answer, firstSend, provider.Failed)
		if res.Refund != nil {
			t.Fatalf("refused refund came with a refund: %+v", *res.Refund)
		}
		s.wantEffects(before, Effects{})
	})

	t.Run("RefundOfUncapturedIsInvalid", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it refunds any intent id, whatever happened to it")
		in := s.authorized("manual")
		before := s.effects()
		res := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund"), IntentID: in.ID})
		s.wantRefundAnswer(res, provider.AnswerInvalid)
		s.wantJudged(res.Answer, firstSend, provider.Failed)
		s.wantEffects(before, Effects{})
	})
}

// lookupTests runs the subtests of the lookups recovery relies on.
func lookupTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("ListRefundsListsEveryRefund", func(t *testing.T) { listRefunds(t, newHarness) })

	t.Run("ListRefundsFindsRefundByMetadata", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("its fixture list holds one refund without metadata, whatever was refunded")
		s.needRefundMetadata()
		in := s.authorized("automatic")
		if got, err := s.Provider.ListRefunds(s.ctx, s.Credentials, in.ID); err != nil || len(got) != 0 {
			t.Fatalf("refunds before any = %+v, %v; want none", got, err)
		}
		want := map[string]int64{s.run + "-r1": 300, s.run + "-r2": 200}
		for id, amt := range want {
			res := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund-" + id), IntentID: in.ID,
				Amount: amt, Metadata: map[string]string{"payment_id": s.paymentID, "refund_id": id}})
			s.wantRefundAnswer(res, provider.AnswerObject)
		}
		got, err := s.Provider.ListRefunds(s.ctx, s.Credentials, in.ID)
		if err != nil {
			t.Fatalf("list refunds: %v", err)
		}
		if len(got) != len(want) {
			t.Fatalf("listed %d refunds, want %d: %+v", len(got), len(want), got)
		}
		for _, rf := range got {
			amt, ok := want[rf.Metadata["refund_id"]]
			if !ok || rf.Amount != amt || !made(rf.State) || rf.ID == "" {
				t.Fatalf("listed refund %+v, want one of %v by metadata refund_id", rf, want)
			}
			delete(want, rf.Metadata["refund_id"])
		}
	})

	t.Run("RetrieveMissingIntentIsNotFound", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it answers any intent id with its fixture intent")
		in, err := s.Provider.RetrieveIntent(s.ctx, s.Credentials, s.missingID())
		if !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("retrieve missing = %+v, %v; want ErrNotFound", in, err)
		}
		s.wantNotFoundJudged()
	})

	t.Run("SearchFindsIntentByPaymentID", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("its fixture search result ignores the query")
		in := s.authorized("manual")
		got, err := s.Provider.SearchIntentByPaymentID(s.ctx, s.Credentials, s.Fixtures.SearchRef(s.paymentID))
		if err != nil {
			t.Fatalf("search: %v", err)
		}
		if got.ID != in.ID || got.State != provider.IntentAuthorized || got.Metadata["payment_id"] != s.paymentID {
			t.Fatalf("search found %+v, want %s authorized with payment_id %s", *got, in.ID, s.paymentID)
		}
		other := s.Fixtures.SearchRef(s.paymentID + "-other")
		if got, err := s.Provider.SearchIntentByPaymentID(s.ctx, s.Credentials, other); !errors.Is(err, provider.ErrNotFound) {
			t.Fatalf("search of an unknown payment = %+v, %v; want ErrNotFound", got, err)
		}
		s.wantNotFoundJudged()
	})
}

// credentialTests runs the subtests of revoked and malformed credentials.
func credentialTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("RevokedCredentialsAnswerCredentialsWithoutEffect", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		s.needState("it keeps no state per key, so a key cannot be revoked")
		if s.RevokeCredentials == nil {
			t.Skip("the harness cannot revoke credentials")
		}
		held := s.authorized("manual")
		authorize := s.authorizeRequest(approvedCard, "manual")
		authorize.IdempotencyKey = s.key("authorize-revoked")
		capture := provider.CaptureRequest{IdempotencyKey: s.key("capture"), IntentID: held.ID}
		before := s.effects()
		restore := sync.OnceFunc(s.RevokeCredentials())
		defer restore()

		res := s.Provider.Authorize(s.ctx, s.Credentials, authorize)
		s.wantAnswer(res, provider.AnswerCredentials)
		// Credentials are checked before the key is looked up: a first send
		// did nothing, a re-send proves nothing about the first.
		s.wantJudged(res.Answer, authorizeFirst, provider.Failed)
		s.wantJudged(res.Answer, authorizeIn, provider.Unknown)
		s.wantJudged(res.Answer, authorizePast, provider.Unknown)
		cres := s.Provider.Capture(s.ctx, s.Credentials, capture)
		s.wantAnswer(cres, provider.AnswerCredentials)
		s.wantJudged(cres.Answer, firstSend, provider.Failed)
		s.wantJudged(cres.Answer, recoveryIn, provider.Unknown)
		rres := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund"), IntentID: held.ID})
		s.wantRefundAnswer(rres, provider.AnswerCredentials)
		s.wantJudged(rres.Answer, firstSend, provider.Failed)
		s.wantJudged(rres.Answer, recoveryIn, provider.Unknown)
		s.wantLookupsFail(held.ID)
		s.wantEffects(before, Effects{})

		restore()
		// The refused sends claimed no key: the same keys now execute.
		res = s.Provider.Authorize(s.ctx, s.Credentials, authorize)
		s.wantAnswer(res, provider.AnswerObject)
		if in := s.wantIntent(res); in.State != provider.IntentAuthorized {
			t.Fatalf("authorize after restore = %+v, want authorized", *in)
		}
		cres = s.Provider.Capture(s.ctx, s.Credentials, capture)
		s.wantAnswer(cres, provider.AnswerObject)
		if in := s.wantIntent(cres); in.State != provider.IntentCaptured {
			t.Fatalf("capture after restore = %+v, want captured", *in)
		}
		s.wantEffects(before, Effects{Authorizations: 1, Captures: 1})
	})

	t.Run("MalformedKeyAnswersCredentials", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		bad := provider.Credentials{SecretKey: "not-a-key"}
		before := s.effects()
		res := s.Provider.Authorize(s.ctx, bad, s.authorizeRequest(approvedCard, "manual"))
		s.wantAnswer(res, provider.AnswerCredentials)
		s.wantJudged(res.Answer, authorizeFirst, provider.Failed)
		s.wantJudged(res.Answer, authorizeIn, provider.Unknown)
		if res.FailureCode == "" || strings.Contains(res.FailureMessage, bad.SecretKey) {
			t.Fatalf("failure = %q %q, want a code and a message without the key", res.FailureCode, res.FailureMessage)
		}
		s.wantEffects(before, Effects{})
	})
}

// transportTests runs the subtests of an unreachable server and of what
// counts as a re-send.
func transportTests(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Run("RefusedConnectionIsUnreachable", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		p := s.ProviderAt(ClosedURL(t))
		// Each call may wait out the adapter's own retries; they run side
		// by side. Nothing was written: a first send did nothing, a
		// recovery proves nothing about the sends before it.
		t.Run("Authorize", func(t *testing.T) {
			t.Parallel()
			res := p.Authorize(t.Context(), s.Credentials, s.authorizeRequest(approvedCard, "manual"))
			wantUnreachable(t, res.Answer, res.FailureCode, res.Err)
			s.wantJudged(res.Answer, authorizeFirst, provider.Failed)
			s.wantJudged(res.Answer, authorizeIn, provider.Unknown)
			s.wantJudged(res.Answer, authorizePast, provider.Unknown)
		})
		t.Run("Capture", func(t *testing.T) {
			t.Parallel()
			res := p.Capture(t.Context(), s.Credentials, provider.CaptureRequest{IdempotencyKey: s.key("capture"), IntentID: s.missingID()})
			wantUnreachable(t, res.Answer, res.FailureCode, res.Err)
			s.wantJudged(res.Answer, firstSend, provider.Failed)
			s.wantJudged(res.Answer, recoveryIn, provider.Unknown)
		})
		t.Run("Cancel", func(t *testing.T) {
			t.Parallel()
			res := p.Cancel(t.Context(), s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: s.missingID()})
			wantUnreachable(t, res.Answer, res.FailureCode, res.Err)
		})
		t.Run("Refund", func(t *testing.T) {
			t.Parallel()
			res := p.Refund(t.Context(), s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund"), IntentID: s.missingID()})
			wantUnreachable(t, res.Answer, res.FailureCode, res.Err)
			s.wantJudged(res.Answer, firstSend, provider.Failed)
			s.wantJudged(res.Answer, recoveryPast, provider.Unknown)
		})
		for _, l := range lookups {
			t.Run(l.name, func(t *testing.T) {
				t.Parallel()
				l.wantFailure(t, p, s.Credentials, s.missingID(), s.Fixtures.SearchRef(s.paymentID))
			})
		}
	})

	t.Run("SingleSendIsNotResent", func(t *testing.T) {
		t.Parallel()
		s := setup(t, newHarness)
		res := s.Provider.Authorize(s.ctx, s.Credentials, s.authorizeRequest(approvedCard, "manual"))
		s.wantAnswer(res, provider.AnswerObject)
		captured := s.wantIntent(res)
		cres := s.Provider.Capture(s.ctx, s.Credentials, provider.CaptureRequest{IdempotencyKey: s.key("capture"), IntentID: captured.ID})
		s.wantAnswer(cres, provider.AnswerObject)
		rres := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund"), IntentID: captured.ID, Amount: 100})
		s.wantRefundAnswer(rres, provider.AnswerObject)
		req := s.authorizeRequest(approvedCard, "manual")
		req.IdempotencyKey = s.key("authorize-again")
		canceled := s.wantIntent(s.Provider.Authorize(s.ctx, s.Credentials, req))
		xres := s.Provider.Cancel(s.ctx, s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: canceled.ID})
		s.wantAnswer(xres, provider.AnswerObject)
		if res.Resent || cres.Resent || rres.Resent || xres.Resent {
			t.Fatalf("resent: authorize %v, capture %v, refund %v, cancel %v; want false for one send each",
				res.Resent, cres.Resent, rres.Resent, xres.Resent)
		}
	})
}

// suite is one subtest's harness and the names it sends.
type suite struct {
	Harness
	t   *testing.T
	ctx context.Context
	// run is unique to the subtest; keys and payment ids derive from it.
	run       string
	paymentID string
}

func setup(t *testing.T, newHarness func(t *testing.T) Harness) *suite {
	t.Helper()
	h := newHarness(t)
	if h.Provider == nil || h.ProviderAt == nil {
		t.Fatal("harness without Provider or ProviderAt")
	}
	if h.Stateful && h.Effects == nil {
		t.Fatal("stateful harness without Effects")
	}
	if f := h.Fixtures; f.Card == nil || f.MissingID == nil || f.SearchRef == nil || f.DeclineCode == "" {
		t.Fatal("harness without Fixtures")
	}
	run := strings.ToLower(rand.Text()[:12])
	return &suite{Harness: h, t: t, ctx: t.Context(), run: run, paymentID: "pay_" + run}
}

// needState skips the subtest on a backend that answers from fixtures; why
// says what its fixtures cannot show.
func (s *suite) needState(why string) {
	s.t.Helper()
	if !s.Stateful {
		s.t.Skipf("stripe-mock is stateless: %s", why)
	}
}

// stateful runs check as a nested subtest that needs state, so a stateless
// backend skips only the assertions its fixtures cannot satisfy and still
// runs the answer checks before it.
func (s *suite) stateful(name, why string, check func(s *suite)) {
	s.t.Helper()
	s.t.Run(name, func(t *testing.T) {
		nested := *s
		nested.t = t
		nested.needState(why)
		check(&nested)
	})
}

// needKeys skips the subtest when the adapter's profile keeps no key: a
// re-send is then a new request, and the service never makes one.
func (s *suite) needKeys() {
	s.t.Helper()
	if s.Provider.Profile().KeyRetention <= 0 {
		s.t.Skipf("the %s profile keeps no idempotency key (KeyRetention 0): a re-send is a new request", s.Provider.Profile().Name)
	}
}

// keysKept runs check as a nested subtest that needs the provider to keep
// keys (see needKeys).
func (s *suite) keysKept(name string, check func(s *suite)) {
	s.t.Helper()
	s.t.Run(name, func(t *testing.T) {
		nested := *s
		nested.t = t
		nested.needKeys()
		check(&nested)
	})
}

// needRefundMetadata skips the subtest when the provider keeps no metadata
// on refunds.
func (s *suite) needRefundMetadata() {
	s.t.Helper()
	if !s.Fixtures.RefundMetadata {
		s.t.Skipf("%s keeps no metadata on refunds", s.Provider.Profile().Name)
	}
}

func (s *suite) key(op string) string { return "conformance-" + s.run + ":" + op + "-v1" }

// missingID is an intent id of the provider's form that names no object.
func (s *suite) missingID() string { return s.Fixtures.MissingID(s.run) }

// The cards Fixtures.Card sets.
type card bool

const (
	approvedCard card = false
	declinedCard card = true
)

func (s *suite) authorizeRequest(c card, captureMethod string) provider.AuthorizeRequest {
	req := provider.AuthorizeRequest{
		IdempotencyKey: s.key("authorize-" + captureMethod),
		Amount:         amount,
		Currency:       "BRL",
		CaptureMethod:  captureMethod,
		Metadata:       map[string]string{"payment_id": s.paymentID, "order_id": "order-" + s.run, "attempt": "1"},
	}
	s.Fixtures.Card(&req, bool(c))
	return req
}

// authorized authorizes amount with a card that is approved.
func (s *suite) authorized(captureMethod string) *provider.Intent {
	s.t.Helper()
	res := s.Provider.Authorize(s.ctx, s.Credentials, s.authorizeRequest(approvedCard, captureMethod))
	s.wantAnswer(res, provider.AnswerObject)
	return s.wantIntent(res)
}

func (s *suite) retrieve(id string) *provider.Intent {
	s.t.Helper()
	in, err := s.Provider.RetrieveIntent(s.ctx, s.Credentials, id)
	if err != nil {
		s.t.Fatalf("retrieve %s: %v", id, err)
	}
	return in
}

// effects is zero on a backend without counts; needState guards every
// assertion that needs them.
func (s *suite) effects() Effects {
	if s.Effects == nil {
		return Effects{}
	}
	return s.Effects()
}

// wantEffects checks the effects since before; stripe-mock has none to
// count, which the subtests that need a count show with needState.
func (s *suite) wantEffects(before, want Effects) {
	s.t.Helper()
	if s.Effects == nil {
		return
	}
	if got := s.effects().sub(before); got != want {
		s.t.Fatalf("effects = %+v, want %+v", got, want)
	}
}

func (s *suite) wantAnswer(res provider.Result, want provider.Answer) {
	s.t.Helper()
	if res.Answer != want {
		s.t.Fatalf("answer = %q (code %q, message %q, err %v), want %q", res.Answer, res.FailureCode, res.FailureMessage, res.Err, want)
	}
}

func (s *suite) wantRefundAnswer(res provider.RefundResult, want provider.Answer) {
	s.t.Helper()
	if res.Answer != want {
		s.t.Fatalf("refund answer = %q (code %q, message %q, err %v), want %q", res.Answer, res.FailureCode, res.FailureMessage, res.Err, want)
	}
}

// wantActedOn checks the answer to a first send that acted on in: the
// object, judged succeeded, and the same intent.
func (s *suite) wantActedOn(res provider.Result, in *provider.Intent, verb string) *provider.Intent {
	s.t.Helper()
	s.wantAnswer(res, provider.AnswerObject)
	s.wantJudged(res.Answer, firstSend, provider.Succeeded)
	got := s.wantIntent(res)
	if got.ID != in.ID {
		s.t.Fatalf("%s intent %s, want %s", verb, got.ID, in.ID)
	}
	return got
}

func (s *suite) wantIntent(res provider.Result) *provider.Intent {
	s.t.Helper()
	if res.Intent == nil || res.Intent.ID == "" {
		s.t.Fatalf("answer %q came without an intent", res.Answer)
	}
	return res.Intent
}

// wantLookupsFail checks that no lookup passes a refusal off as absence:
// ErrNotFound past the search grace judges Failed, which would let a
// recovery conclude that nothing was charged.
func (s *suite) wantLookupsFail(intentID string) {
	s.t.Helper()
	for _, l := range lookups {
		l.wantFailure(s.t, s.Provider, s.Credentials, intentID, s.Fixtures.SearchRef(s.paymentID))
	}
}

// lookup is one of the calls recovery relies on to learn what happened.
type lookup struct {
	name string
	// ref is what SearchIntentByPaymentID takes (Fixtures.SearchRef).
	call func(ctx context.Context, p provider.Provider, c provider.Credentials, intentID, ref string) (any, error)
}

var lookups = []lookup{
	{"RetrieveIntent", func(ctx context.Context, p provider.Provider, c provider.Credentials, intentID, _ string) (any, error) {
		return p.RetrieveIntent(ctx, c, intentID)
	}},
	{"SearchIntentByPaymentID", func(ctx context.Context, p provider.Provider, c provider.Credentials, _, ref string) (any, error) {
		return p.SearchIntentByPaymentID(ctx, c, ref)
	}},
	{"ListRefunds", func(ctx context.Context, p provider.Provider, c provider.Credentials, intentID, _ string) (any, error) {
		return p.ListRefunds(ctx, c, intentID)
	}},
}

// wantFailure checks the lookup fails with an error other than ErrNotFound.
func (l lookup) wantFailure(t *testing.T, p provider.Provider, c provider.Credentials, intentID, ref string) {
	t.Helper()
	if got, err := l.call(t.Context(), p, c, intentID, ref); err == nil || errors.Is(err, provider.ErrNotFound) {
		t.Fatalf("%s = %+v, %v; want an error other than ErrNotFound", l.name, got, err)
	}
}

// made reports whether a refund in state st counts as made; a pending one
// does (provider.RefundPending).
func made(st provider.RefundState) bool {
	return st == provider.RefundSucceeded || st == provider.RefundPending
}

// wantNotFoundJudged checks what ErrNotFound from a lookup proves: nothing
// while search may still lag the write, a failure once it cannot.
func (s *suite) wantNotFoundJudged() {
	s.t.Helper()
	lag := s.Provider.Profile().SearchLag
	s.wantJudged(provider.AnswerNotFound, provider.Send{Recovery: true, Since: lag - time.Second}, provider.Unknown)
	s.wantJudged(provider.AnswerNotFound, provider.Send{Recovery: true, Since: lag}, provider.Failed)
}

// storedOutcome is what answer a, which proves proven on a first send,
// must prove on send by what the adapter's profile declares it stores: the
// same on a recovery when the provider keeps keys and stores a for good, or
// while in window; nothing otherwise.
func (s *suite) storedOutcome(a provider.Answer, send provider.Send, proven provider.Outcome) provider.Outcome {
	p := s.Provider.Profile()
	if !send.Recovery {
		return proven
	}
	if p.KeyRetention > 0 {
		switch p.Stores[a] {
		case provider.StoredForGood:
			return proven
		case provider.StoredWhileKept:
			if send.InWindow {
				return proven
			}
		}
	}
	return provider.Unknown
}

// wantJudged checks what an answer proves by the adapter's own profile.
func (s *suite) wantJudged(a provider.Answer, send provider.Send, want provider.Outcome) {
	s.t.Helper()
	if got := provider.Judge(s.Provider.Profile(), a, send); got != want {
		s.t.Fatalf("Judge(%s, %q, %+v) = %q, want %q", s.Provider.Profile().Name, a, send, got, want)
	}
}

// wantUnreachable checks an answer that proves the request never reached
// the provider.
func wantUnreachable(t *testing.T, a provider.Answer, code string, err error) {
	t.Helper()
	if a != provider.AnswerUnreachable || code != provider.FailureUnreachable || err == nil {
		t.Fatalf("answer = %q code %q (err %v), want unreachable with %s and an error", a, code, err, provider.FailureUnreachable)
	}
}

// ClosedURL is the base URL of a port that was just listening and is now
// closed: connections are refused.
func ClosedURL(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("close listener: %v", err)
	}
	return "http://" + addr
}

// cancelOfDeclined: a declined intent awaits another payment method and
// could still be paid with its client secret; a cancel ends that.
func cancelOfDeclined(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Parallel()
	s := setup(t, newHarness)
	s.needState("it never declines: every create answers its fixture intent")
	if !s.Fixtures.DeclineStaysOpen {
		t.Skipf("a refusal is final at %s: the declined payment can be neither paid nor canceled", s.Provider.Profile().Name)
	}
	declined := s.Provider.Authorize(s.ctx, s.Credentials, s.authorizeRequest(declinedCard, "automatic"))
	s.wantAnswer(declined, provider.AnswerCardError)
	in := s.wantIntent(declined)
	before := s.effects()
	res := s.Provider.Cancel(s.ctx, s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: in.ID})
	s.wantAnswer(res, provider.AnswerObject)
	s.wantJudged(res.Answer, firstSend, provider.Succeeded)
	if got := s.wantIntent(res); got.ID != in.ID || got.State != provider.IntentCanceled {
		t.Fatalf("canceled intent = %+v, want %s canceled", *got, in.ID)
	}
	s.wantEffects(before, Effects{Cancels: 1})
	if got := s.retrieve(in.ID); got.State != provider.IntentCanceled {
		t.Fatalf("retrieved %+v, want canceled", *got)
	}
}

// cancelOfFinalDecline: where a refusal is final (Mercado Pago's rejected
// payment), nothing is left to cancel; the provider refuses, and the
// payment stays declined.
func cancelOfFinalDecline(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Parallel()
	s := setup(t, newHarness)
	s.needState("it never declines: every create answers its fixture intent")
	if s.Fixtures.DeclineStaysOpen {
		t.Skipf("a declined payment at %s stays open until canceled (CancelOfDeclinedCancelsIt)", s.Provider.Profile().Name)
	}
	declined := s.Provider.Authorize(s.ctx, s.Credentials, s.authorizeRequest(declinedCard, "automatic"))
	s.wantAnswer(declined, provider.AnswerCardError)
	in := s.wantIntent(declined)
	before := s.effects()
	res := s.Provider.Cancel(s.ctx, s.Credentials, provider.CancelRequest{IdempotencyKey: s.key("cancel"), IntentID: in.ID})
	s.wantAnswer(res, provider.AnswerInvalid)
	s.wantJudged(res.Answer, firstSend, provider.Failed)
	s.wantEffects(before, Effects{})
	if got := s.retrieve(in.ID); got.State != provider.IntentNeedsPaymentMethod {
		t.Fatalf("retrieved %+v, want still needs_payment_method", *got)
	}
}

// listRefunds: every refund of an intent is listed with its id, amount and
// state, whether or not the provider keeps their metadata.
func listRefunds(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Parallel()
	s := setup(t, newHarness)
	s.needState("its fixture list holds one refund, whatever was refunded")
	in := s.authorized("automatic")
	if got, err := s.Provider.ListRefunds(s.ctx, s.Credentials, in.ID); err != nil || len(got) != 0 {
		t.Fatalf("refunds before any = %+v, %v; want none", got, err)
	}
	want := map[string]int64{}
	for _, amt := range []int64{300, 200} {
		res := s.Provider.Refund(s.ctx, s.Credentials, provider.RefundRequest{IdempotencyKey: s.key("refund-" + strconv.FormatInt(amt, 10)),
			IntentID: in.ID, Amount: amt})
		s.wantRefundAnswer(res, provider.AnswerObject)
		if res.Refund == nil || res.Refund.ID == "" {
			t.Fatalf("refund answer %+v, want a refund with an id", res)
		}
		want[res.Refund.ID] = amt
	}
	got, err := s.Provider.ListRefunds(s.ctx, s.Credentials, in.ID)
	if err != nil {
		t.Fatalf("list refunds: %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("listed %d refunds, want %d: %+v", len(got), len(want), got)
	}
	for _, rf := range got {
		if amt, ok := want[rf.ID]; !ok || rf.Amount != amt || !made(rf.State) {
			t.Fatalf("listed refund %+v, want one of %v by id", rf, want)
		}
		delete(want, rf.ID)
	}
}
