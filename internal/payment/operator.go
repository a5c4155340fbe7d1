package payment

import (
	"context"
	"errors"

	"github.com/acmepay/payments/internal/idempotency"
	"github.com/acmepay/payments/internal/provider"
)

// ProviderState is the provider's live view of a payment, for an operator
// comparing it with ours.
type ProviderState struct {
	// Intent is nil when the provider has no object for the payment.
	Intent *provider.Intent
	// Refunded sums the intent's refunds the provider made.
	Refunded int64
	// Searched: the intent was found by its metadata payment_id because we
	// hold no provider id.
	Searched bool
}

// ProviderState asks the provider, now, for a payment of any account: by
// the intent id we hold, or by a search on the payment id when we hold
// none. It reads only; nothing is recorded.
func (s *Service) ProviderState(ctx context.Context, accounts Accounts, paymentID string) (ProviderState, error) {
	p, err := s.store.PaymentGetAny(ctx, paymentID)
	if err != nil {
		return ProviderState{}, err
	}
	acct, err := accounts.Payer(ctx, p.AccountID)
	if err != nil {
		return ProviderState{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, s.providerTimeout)
	defer cancel()
	var st ProviderState
	if p.ProviderPaymentID != "" {
		st.Intent, err = s.provider.RetrieveIntent(ctx, acct.Credentials, p.ProviderPaymentID)
	} else {
		st.Searched = true
		st.Intent, err = s.provider.SearchIntentByPaymentID(ctx, acct.Credentials, p.ID)
	}
	if errors.Is(err, provider.ErrNotFound) {
		return ProviderState{Searched: st.Searched}, nil
	}
	if err != nil {
		return ProviderState{}, err
	}
	refunds, err := s.provider.ListRefunds(ctx, acct.Credentials, st.Intent.ID)
	if err != nil {
		return ProviderState{}, err
	}
	for _, r := range refunds {
		if r.State == provider.RefundSucceeded {
			st.Refunded += r.Amount
		}
	}
	return st, nil
}

// AdminCancel is an operator's cancel of a payment of any account: the
// merchant's cancel, with the same guards, audited with actor and reason.
func (s *Service) AdminCancel(ctx context.Context, accounts Accounts, key, paymentID, actor, reason string) (idempotency.Answer, error) {
	p, err := s.store.PaymentGetAny(ctx, paymentID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	acct, err := accounts.Payer(ctx, p.AccountID)
	if err != nil {
		return idempotency.Answer{}, err
	}
	return s.Cancel(WithReason(WithActor(ctx, actor), reason), acct, key, p.ID)
}

// AgeCount is how many payments in one status have been in it for one age
// bucket: under_5m, 5m_to_1h, 1h_to_24h or over_24h.
type AgeCount struct {
	Status Status
	Age    string
	N      int64
}
