package operations

import (
	"context"
	"log/slog"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/provider"
)

// The audit reads the provider's side in bulk: each provider account's
// payments of the window are listed (provider.Lister), one slice of
// provider time at a time, 100 to a page, and each payment of ours is
// compared with what its slice showed. A payment the lists did not show
// is looked up alone (fetch), as before:
//   - Stripe lists by creation only: a payment created more than a slice
//     before we last changed it (refunded or disputed days after it was
//     paid) lies in a slice the pass no longer holds;
//   - Mercado Pago lists by last change: a payment changed there again
//     after the slices around our own change were listed;
//   - a payment that changed here after its slice was listed, or within
//     the list's lag before (Mercado Pago's search lags its writes): the
//     list may show an older state; and one whose slice failed to list;
//   - a payment with no provider object in the list (missing there, or
//     skipped by offset paging over a set that changed meanwhile).
//
// Our pages go by updated_at, so the slices a pass needs move forward with
// them: only the slices around the current payment's change are listed or
// kept, which bounds memory to about three hours of each provider
// account's payments and lists every slice at most once per pass. The
// provider calls of a pass are then about (its payments in the
// window)/100 per provider account, plus per slice and account the last,
// partial page and the neighbouring slices probed for a payment the list
// lacked, plus a lookup per payment of the cases above and per disputed
// payment (the list flags a dispute but does not carry it).
const (
	auditSlice    = time.Hour
	auditPageSize = 100
)

// listings holds, for one pass, what each provider account's list showed.
type listings struct {
	origin time.Time // slice 0 starts at the window's start
	by     map[listingKey]*listing
}

type listingKey struct{ account, provider string }

// listing is one provider account's listed slices; slices below floor were
// dropped (or never needed) and are not listed again this pass.
type listing struct {
	slices map[int]*listedSlice
	floor  int
}

// listedSlice is what one slice's list showed, by provider id and by the
// payment (and attempt) it carries, and when it was read.
type listedSlice struct {
	at        time.Time
	ok        bool
	byID      map[string]*provider.Listed
	byPayment map[string]*provider.Listed
}

func newListings(origin time.Time) *listings {
	return &listings{origin: origin, by: map[listingKey]*listing{}}
}

// sliceOf is the slice holding t; slice -1 ends where the window starts.
func (ls *listings) sliceOf(t time.Time) int {
	d := t.Sub(ls.origin)
	i := int(d / auditSlice)
	if d < 0 && d%auditSlice != 0 {
		i--
	}
	return i
}

// listedState returns what the provider's list shows of p, ok false when
// the list cannot tell (see above) and p must be looked up alone.
func (s *Service) listedState(ctx context.Context, ls *listings, acct payment.Account, b at, p *payment.Payment) (providerState, bool, error) {
	lister, ok := b.prov.(provider.Lister)
	if !ok {
		return providerState{}, false, nil
	}
	key := listingKey{acct.ID, payment.ProviderOf(p.Provider)}
	l := ls.by[key]
	if l == nil {
		l = &listing{slices: map[int]*listedSlice{}, floor: -1}
		ls.by[key] = l
	}
	frontier := ls.sliceOf(p.UpdatedAt)
	l.drop(frontier - 1)
	t := p.UpdatedAt
	if lister.ListedBy() == provider.ListedByCreated {
		t = p.CreatedAt
	}
	k, last := ls.sliceOf(t), ls.sliceOf(s.now())
	for _, i := range []int{k, k + 1, k - 1} {
		if i < l.floor || i < frontier-1 || i > frontier+1 || i > last {
			continue
		}
		sl, err := s.slice(ctx, ls, l, i, lister, b.creds)
		if err != nil {
			return providerState{}, false, err
		}
		// A list read before our last change, or too soon after it for
		// the list to show it, may show an older state.
		if in := sl.match(b.prov, p); in != nil && sl.ok && p.UpdatedAt.Before(sl.at.Add(-lister.ListLag())) {
			st, err := s.fromListed(ctx, b, in)
			return st, true, err
		}
	}
	return providerState{}, false, nil
}

// drop forgets the slices below floor.
func (l *listing) drop(floor int) {
	if floor <= l.floor {
		return
	}
	for i := range l.slices {
		if i < floor {
			delete(l.slices, i)
		}
	}
	l.floor = floor
}

// slice returns slice i of the listing, reading it from the provider page
// by page the first time. A failed read is kept as a slice that shows
// nothing, so its payments are looked up alone and it is not read again.
func (s *Service) slice(ctx context.Context, ls *listings, l *listing, i int, lister provider.Lister, creds provider.Credentials) (*listedSlice, error) {
	if sl := l.slices[i]; sl != nil {
		return sl, nil
	}
	sl := &listedSlice{at: s.now(), ok: true, byID: map[string]*provider.Listed{}, byPayment: map[string]*provider.Listed{}}
	l.slices[i] = sl
	q := provider.ListQuery{From: ls.origin.Add(time.Duration(i) * auditSlice), Limit: auditPageSize}
	q.To = q.From.Add(auditSlice)
	for {
		var page provider.ListPage
		err := s.paced(ctx, func(ctx context.Context) (err error) {
			page, err = lister.ListIntents(ctx, creds, q)
			return err
		})
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.log.WarnContext(ctx, "audit: listing failed; its payments are looked up one by one", slog.String("error", err.Error()))
			sl.ok = false
			return sl, nil
		}
		sl.add(page.Intents)
		if page.Next == "" {
			return sl, nil
		}
		q.Cursor = page.Next
	}
}

func (sl *listedSlice) add(intents []provider.Listed) {
	for j := range intents {
		in := &intents[j]
		sl.byID[in.Intent.ID] = in
		if in.PaymentID == "" {
			continue
		}
		ref := refKey(in.PaymentID, in.Attempt)
		// Several objects of one payment (one per attempt): the lookup
		// alone picks the newest, as a search does; nil marks the payment
		// for it.
		if _, seen := sl.byPayment[ref]; seen {
			sl.byPayment[ref] = nil
			continue
		}
		sl.byPayment[ref] = in
	}
}

func refKey(paymentID string, attempt int) string {
	return paymentID + ":" + strconv.Itoa(attempt)
}

// match finds p's object as the single lookup would: by its provider id,
// else by its payment id (and its latest attempt where the provider
// searches by attempt).
func (sl *listedSlice) match(prov provider.Provider, p *payment.Payment) *provider.Listed {
	if p.ProviderPaymentID != "" {
		return sl.byID[p.ProviderPaymentID]
	}
	if _, ok := prov.(provider.AttemptSearcher); ok {
		return sl.byPayment[refKey(p.ID, p.Attempt)]
	}
	return sl.byPayment[refKey(p.ID, 0)]
}

// fromListed is the provider's state as fetch would report it, from a
// listed object: only a flagged dispute needs a call of its own.
func (s *Service) fromListed(ctx context.Context, b at, l *provider.Listed) (providerState, error) {
	in := l.Intent
	st := providerState{intent: &in, failed: map[payment.DiscrepancyKind]error{}}
	if in.AmountReceived == 0 || !l.Disputed {
		if in.AmountReceived != 0 {
			st.refunded = l.Refunded
		}
		return st, nil
	}
	st.refunded = l.Refunded
	return st, s.readDisputes(ctx, b, in.ID, &st)
}

// paced runs one provider call after a token of the bucket, bounded by
// PROVIDER_TIMEOUT.
func (s *Service) paced(ctx context.Context, f func(ctx context.Context) error) error {
	if err := s.bucket.wait(ctx); err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.providerTimeout)
	defer cancel()
	return f(cctx)
}
