package chaos

import (
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/postgres/pgfault"
	"github.com/acmepay/payments/internal/provider/providersim"
)

// Report is the figures of a run. The first group are invariants: any
// non-zero value fails the run.
type Report struct {
	Seed     uint64
	Duration time.Duration
	Replicas int
	Clients  int
	Database string

	DoubleCharges    int // orders with more than one successful authorization at the provider
	LostPayments     int // provider effects with no local payment in the same state
	Phantoms         int // local successes the provider has no record of
	AmountMismatches int // captured or refunded amounts that differ from the provider's
	Lies             int // final results shown to a client that the final state or the provider contradicts
	Stranded         int // payments still processing/unknown after reconciliation
	StrandedAttempts int
	StrandedRefunds  int
	Unexpected       int // answers the contract does not allow (a 422 for a plain retry, say)
	BothSent         int // orders whose capture and cancel both reached the provider
	LateResends      int // provider keys that reached the provider after their re-send window
	FalseNoEffect    int // attempts failed as having had no effect that the provider's log contradicts
	TwoProviders     int // payments with an object at both providers: a failover without proof
	// Merchant is the service's webhooks to the merchant's endpoint: its
	// Lost and BadSignatures are invariants, its Duplicates allowed.
	Merchant merchantTally
	// Feed is the events feed read to its end at several page sizes
	// against the events stored: its Errors are invariants.
	Feed feedTally
	// Xid is where the server's xid8 went: the run's private cluster
	// starts just below a boundary.
	Xid xidTally
	// Histories are the history checkers' verdicts: each "no" is a
	// violation.
	Histories historyVerdicts

	Traffic    tally
	Webhooks   webhookTally
	Deliveries map[string]int // stored webhook deliveries by outcome
	Sim        providersim.Stats
	Faults     map[providersim.FaultKind]int
	Kills      int
	Restarts   int
	PGRestarts int
	PGSkipped  string
	// Failover of the database (Config.Failover): the time from stopping
	// the primary to the first 201 of a create sent after it, the requests
	// failed (5xx, transport errors) until then, and whether no create
	// succeeded after it by the end of the run.
	Failovers        int
	FailoverPromoted time.Duration // from the stop until the standby accepted writes
	FailoverRecovery time.Duration
	FailoverFailed   int
	NotRecovered     int
	Passes           int // reconcile --once passes
	// ProviderFailovers are payments whose authorization moved from one
	// provider to the next within the create (the first refused the
	// credentials).
	ProviderFailovers int
	Intents           int // payment objects at both providers
	// ByProvider splits the invariants and the traffic by provider
	// (stripe, mercadopago).
	ByProvider map[string]*providerFigures

	// Key expiry.
	Keys             keySettings
	MPKeys           keySettings    // Mercado Pago's; a zero Retention keeps no key
	ResolvedByLookup map[string]int // operation -> attempts a lookup settled past their window
	LookupRequests   map[string]int // search, retrieve, list_refunds answered 200 by the provider
	KeysResent       int            // provider keys that reached the provider more than once
	KeysForgotten    int            // keys older than the provider's retention by the end

	// Outages of one provider behind its front ("stripe refused", …), and
	// the circuits they opened (counted in the replicas' logs).
	Outages         map[string]int
	OutageTime      time.Duration
	CircuitOpenings int
	// Faults between the replicas and PostgreSQL, by kind, and what the
	// proxy did; nil without them.
	DBFaults map[string]int
	DBProxy  pgfault.Stats

	// Credential rotation.
	Revocations   int
	Revoked       time.Duration
	Refused       refusals
	AuthFailed    int // authorizations failed provider_authentication
	AuthFailedOps int // capture, cancel and refund attempts failed provider_authentication

	Samples []string // the first violations, for diagnosis
}

// Violations is the number of invariant breaches.
func (r *Report) Violations() int {
	return r.DoubleCharges + r.LostPayments + r.Phantoms + r.AmountMismatches + r.Lies +
		r.Stranded + r.StrandedAttempts + r.StrandedRefunds + r.Unexpected + r.BothSent +
		r.LateResends + r.FalseNoEffect + r.TwoProviders + r.NotRecovered + r.Merchant.Lost + r.Merchant.BadSignatures +
		r.Feed.Errors() + r.Histories.violations()
}

// Lookups is the number of attempts settled by a lookup past their window.
func (r *Report) Lookups() int {
	n := 0
	for _, v := range r.ResolvedByLookup {
		n += v
	}
	return n
}

// refusals counts the provider's 401s while the secret key was revoked.
type refusals struct {
	FirstSends int // a key's first arrival: the request had no effect
	Resends    int // a later arrival of a key: it says nothing of the first
	Lookups    int // search, retrieve, list_refunds
	// Recovered is the attempts whose re-send met a 401; Settled those of
	// them resolved by the end.
	Recovered, Settled int
}

const maxSamples = 20

func (r *Report) sample(format string, args ...any) {
	if len(r.Samples) < maxSamples {
		r.Samples = append(r.Samples, fmt.Sprintf(format, args...))
	}
}

// authorizedAtProvider reports whether an intent was ever successfully
// authorized: held (requires_capture), charged (succeeded) or released
// after a hold (canceled with its card attached; a declined intent loses
// its payment method).
func authorizedAtProvider(in providersim.Intent) bool {
	switch in.Status {
	case "requires_capture", "succeeded":
		return true
	case "canceled":
		return in.PaymentMethod != ""
	}
	return false
}

// localFor maps a successful intent state to the local status it implies.
var localFor = map[string]string{"requires_capture": "authorized", "succeeded": "captured", "canceled": "canceled"}

// checkRaces reads the provider's request log: of a capture and a cancel
// racing on one payment (one intent: an order's declined attempt has its
// own intent canceled before the next attempt), exactly one may reach the
// provider.
func (r *Report) checkRaces(reqs []providersim.Request) {
	sent := map[string]map[string]bool{} // order and intent -> capturar/cancelar
	for _, q := range reqs {
		// A request refused for its credentials was turned away before
		// anything happened: it did not reach the payment.
		if (q.Op != "capture" && q.Op != "cancel" && q.Op != "mp_update") || q.Status == http.StatusUnauthorized {
			continue
		}
		order, op, ok := strings.Cut(q.IdempotencyKey, ":")
		if !ok {
			continue
		}
		op, _, _ = strings.Cut(op, "-")
		// /v1/payment_intents/{id}/capture or /cancel, or Mercado Pago's
		// PUT /v1/payments/{id}
		if parts := strings.Split(q.Path, "/"); len(parts) >= 4 {
			order += " (intent " + parts[3] + ")"
		}
		if sent[order] == nil {
			sent[order] = map[string]bool{}
		}
		sent[order][op] = true
	}
	orders := make([]string, 0, len(sent))
	for o, ops := range sent {
		if ops["capturar"] && ops["cancelar"] {
			orders = append(orders, o)
		}
	}
	sort.Strings(orders)
	for _, o := range orders {
		r.BothSent++
		r.sample("race: order %s had both a capture and a cancel sent to the provider", o)
	}
}

// Failure codes with which the service says an attempt had no effect at
// the provider, so that a new key may try again.
const (
	codeAuthentication = "provider_authentication" // its first send was refused for the credentials
	codeUnreachable    = "provider_unreachable"    // its first send never reached the provider
	codeNoEffect       = "no_effect_at_provider"   // past the window, the intent shows the capture or cancel did not happen
	codeNotFound       = "not_found_at_provider"   // past the window, the provider has no object for it
)

// hadEffect reports whether a request, in the provider's log, may have
// acted: it was answered with the object or a decline (a replay of an
// earlier effect included), or its answer was lost or delayed after the
// effect. Refusals (401, 403, 409 in progress, a 500 before the effect)
// acted on nothing.
func hadEffect(q providersim.Request) bool {
	switch q.Fault {
	case providersim.DropAfterEffect, providersim.DelayAfterEffect, providersim.HoldAfterEffect:
		return true
	}
	// Mercado Pago answers a create or a refund 201, a decline included.
	return q.Status == http.StatusOK || q.Status == http.StatusCreated || q.Status == http.StatusPaymentRequired
}

// checkNoEffect holds every attempt the service failed as having had no
// effect against the provider's log of its key. A first send refused for
// its credentials (CONTRACT §5) is the only way to provider_authentication,
// and the provider refuses before it looks at the key: every request with
// the key must have been answered 401. One that never reached the
// provider (provider_unreachable) must have no request with its key in the
// provider's log at all. A capture, cancel or refund decided
// past its window as not done (no_effect_at_provider, not_found_at_provider)
// must have no request with its key that acted. An authorization failed
// either way must have no intent at the provider. A 401 on a re-send
// proves nothing: such an attempt must stay unknown and be settled later,
// which the stranded figure checks. It also counts the provider's 401s.
func (r *Report) checkNoEffect(reqs []providersim.Request, recs []record, st *localState) {
	byKey := keyed(reqs)
	r.countRefusals(reqs, byKey)
	// Payment id and attempt -> the objects that attempt made at the
	// providers: a payment failed over holds one attempt's object at the
	// next provider beside the refused one's.
	intentsOf := map[string][]string{}
	for _, in := range recs {
		k := in.Metadata["payment_id"] + ":" + in.Metadata["attempt"]
		intentsOf[k] = append(intentsOf[k], in.ID+" "+in.Status)
	}

	ids := make([]string, 0, len(st.Attempts))
	for id := range st.Attempts {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	found := map[string]bool{} // one finding per attempt
	for _, id := range ids {
		a := st.Attempts[id]
		qs := byKey[a.ProviderKey]
		if len(qs) > 1 && qs[0].Status != http.StatusUnauthorized {
			for _, q := range qs[1:] {
				if q.Status == http.StatusUnauthorized {
					r.Refused.Recovered++
					if resolved(a.Status) {
						r.Refused.Settled++
					}
					break
				}
			}
		}
		switch a.FailureCode {
		case codeAuthentication:
			if a.Operation == "autorizar" {
				r.AuthFailed++
			} else {
				r.AuthFailedOps++
			}
		case codeNoEffect, codeNotFound, codeUnreachable:
		default:
			continue
		}
		var contra []string
		for _, q := range qs {
			if a.FailureCode == codeUnreachable || (a.FailureCode == codeAuthentication && q.Status != http.StatusUnauthorized) || hadEffect(q) {
				contra = append(contra, answerOf(q))
			}
		}
		before := len(found)
		switch {
		case a.FailureCode == codeAuthentication && len(qs) == 0:
			found[a.ID] = true
			r.sample("false no-effect failure: attempt %s (payment %s, key %s) failed %s, but its key never reached the provider",
				a.ID, a.PaymentID, a.ProviderKey, a.FailureCode)
		case len(contra) > 0:
			found[a.ID] = true
			r.sample("false no-effect failure: attempt %s (payment %s, key %s) failed %s, but the provider answered that key %s",
				a.ID, a.PaymentID, a.ProviderKey, a.FailureCode, strings.Join(contra, ", "))
		}
		if ins := intentsOf[a.PaymentID+":"+strconv.Itoa(a.Number)]; a.Operation == "autorizar" && len(ins) > 0 && !found[a.ID] {
			found[a.ID] = true
			r.sample("false no-effect failure: attempt %s (payment %s) failed %s, but the provider has %s for the attempt",
				a.ID, a.PaymentID, a.FailureCode, strings.Join(ins, ", "))
		}
		if len(found) > before {
			r.of(a.Provider).FalseNoEffect++
		}
	}
	r.FalseNoEffect = len(found)
}

// countRefusals counts the providers' 401s: to lookups, and to a key's
// first arrival or a later one.
func (r *Report) countRefusals(reqs []providersim.Request, byKey map[string][]providersim.Request) {
	for _, q := range reqs {
		if q.Status == http.StatusUnauthorized && q.Method == http.MethodGet {
			r.Refused.Lookups++
		}
	}
	for _, qs := range byKey {
		for i, q := range qs {
			switch {
			case q.Status != http.StatusUnauthorized:
			case i == 0:
				r.Refused.FirstSends++
			default:
				r.Refused.Resends++
			}
		}
	}
}

func answerOf(q providersim.Request) string {
	s := fmt.Sprintf("%d at %s", q.Status, q.Time.Format("15:04:05.000"))
	if q.Fault != "" {
		s += " (" + string(q.Fault) + ")"
	}
	return s
}

// check compares the providers' effects, the database and what clients
// were shown.
func (r *Report) check(recs []record, st *localState, f *fleet) {
	r.Intents = len(recs)
	for _, in := range recs {
		pf := r.of(in.Provider)
		pf.Records++
		if authorizedAtProvider(in.Intent) {
			pf.Authorized++
		}
	}
	for _, p := range st.Payments {
		pf := r.of(p.Provider)
		pf.Payments++
		if p.Status == "captured" {
			pf.Captured++
		}
	}
	for id := range st.Refunds {
		r.of(st.providerOf(st.RefundPayment[id])).Refunds++
	}
	r.ProviderFailovers = st.failovers()
	r.checkTwoProviders(recs)
	r.checkEffects(recs, st)
	r.checkPhantoms(recs, st)
	r.checkShown(providerTruth(recs), st, f)
	r.Stranded, r.StrandedAttempts, r.StrandedRefunds = st.UnresolvedPayments, st.UnresolvedAttempts, st.UnresolvedRefunds
	for prov, n := range st.strandedBy() {
		r.of(prov).Stranded += n
	}
	if r.Stranded+r.StrandedAttempts+r.StrandedRefunds > 0 {
		r.sample("stranded: %d payments, %d attempts, %d refunds still processing/unknown after reconciliation",
			r.Stranded, r.StrandedAttempts, r.StrandedRefunds)
	}
	r.Deliveries = st.Deliveries
}

// checkTwoProviders counts the payments with an object at both
// providers, whatever its state: a create moves to the next provider only
// when the first provably did nothing, so the first never has one.
func (r *Report) checkTwoProviders(recs []record) {
	at := map[string]map[string]string{}
	for _, in := range recs {
		id := in.Metadata["payment_id"]
		if id == "" {
			continue
		}
		if at[id] == nil {
			at[id] = map[string]string{}
		}
		at[id][in.Provider] = in.ID
	}
	ids := make([]string, 0, len(at))
	for id, objs := range at {
		if len(objs) > 1 {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		r.TwoProviders++
		r.sample("two providers: payment %s has %s %s and %s %s", id, provName(provStripe), at[id][provStripe], provName(provMP), at[id][provMP])
	}
}

// checkEffects holds each authorization at either provider against its
// local payment (lost payments, amounts), and counts the orders
// authorized more than once, at one provider or across both.
func (r *Report) checkEffects(recs []record, st *localState) {
	byOrder := map[string][]record{}
	for _, in := range recs {
		if !authorizedAtProvider(in.Intent) {
			continue
		}
		order := in.Metadata["order_id"]
		byOrder[order] = append(byOrder[order], in)
		p := st.ByProviderID[in.ID]
		if p == nil {
			p = st.Payments[in.Metadata["payment_id"]]
		}
		want := localFor[in.Status]
		switch {
		case p == nil:
			r.LostPayments++
			r.of(in.Provider).LostPayments++
			r.sample("lost payment: %s %s (%s, order %s, payment_id %s) has no local payment", provName(in.Provider), in.ID, in.Status, order, in.Metadata["payment_id"])
			continue
		case p.Status != want:
			r.LostPayments++
			r.of(in.Provider).LostPayments++
			r.sample("lost payment: %s %s is %s at the provider, payment %s is %s locally (want %s)", provName(in.Provider), in.ID, in.Status, p.ID, p.Status, want)
			continue
		}
		if in.Status == "succeeded" && (p.AmountCaptured != in.AmountReceived || p.AmountRefunded != in.AmountRefunded) {
			r.AmountMismatches++
			r.of(in.Provider).AmountMismatches++
			r.sample("amounts: payment %s captured %d refunded %d locally, %d and %d at the provider (%s %s)",
				p.ID, p.AmountCaptured, p.AmountRefunded, in.AmountReceived, in.AmountRefunded, provName(in.Provider), in.ID)
		}
	}
	orders := make([]string, 0, len(byOrder))
	for o := range byOrder {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	for _, o := range orders {
		ins := byOrder[o]
		if len(ins) < 2 {
			continue
		}
		names := make([]string, len(ins))
		for i, in := range ins {
			names[i] = in.Provider + " " + in.ID
		}
		r.DoubleCharges++
		r.of(ins[len(ins)-1].Provider).DoubleCharges++
		r.sample("double charge: order %s authorized %d times at the providers: %s", o, len(ins), strings.Join(names, ", "))
	}
}

// checkPhantoms counts the local successes the provider has no
// authorization for, and the local cancels it has no object for.
func (r *Report) checkPhantoms(recs []record, st *localState) {
	byID := make(map[string]record, len(recs))
	for _, in := range recs {
		byID[in.ID] = in
	}
	for _, p := range st.Payments {
		in, ok := byID[p.ProviderID]
		switch p.Status {
		case "authorized", "captured":
		case "canceled":
			if ok && in.Status == "canceled" {
				// Released after a hold, or a Pix or Boleto that lapsed
				// or was canceled unpaid.
				continue
			}
		default:
			continue
		}
		if ok && authorizedAtProvider(in.Intent) {
			continue // a state mismatch was counted as a lost payment by checkEffects
		}
		r.Phantoms++
		r.of(p.Provider).Phantoms++
		r.sample("phantom: payment %s (order %s) is %s locally; the provider shows no such authorization (%s %q)", p.ID, p.OrderID, p.Status, provName(p.Provider), p.ProviderID)
	}
}

// providerTruth is what the providers say became of each payment (by
// metadata payment_id): the truth a client's answer is held against too.
func providerTruth(recs []record) map[string]string {
	truth := map[string]string{}
	for _, in := range recs {
		pid := in.Metadata["payment_id"]
		switch {
		case authorizedAtProvider(in.Intent):
			truth[pid] = localFor[in.Status]
		case in.Status == "requires_payment_method" && in.LatestCharge != "" && truth[pid] == "":
			truth[pid] = "declined"
		}
	}
	return truth
}

// checkShown holds what the clients were shown against the final local
// state and the provider's truth, and takes the fleet's traffic figures.
func (r *Report) checkShown(truth map[string]string, st *localState, f *fleet) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// reaches reports whether a payment shown as seen may have legitimately
	// become final since: only by its own client's capture or cancel.
	reaches := func(seen, final, paymentID string) bool {
		return seen == final ||
			(seen == "authorized" && final == "captured" && f.ops[paymentID]["capture"]) ||
			(seen == "authorized" && final == "canceled" && f.ops[paymentID]["cancel"])
	}
	for _, o := range f.obs {
		p := st.Payments[o.PaymentID]
		provider, known := truth[o.PaymentID]
		prov := st.providerOf(o.PaymentID)
		switch {
		case p == nil:
			r.Lies++
			r.of(prov).Lies++
			r.sample("lie: order %s was shown payment %s %s (%s), which the database does not have", o.Order, o.PaymentID, o.Status, o.Via)
		case !reaches(o.Status, p.Status, p.ID):
			r.Lies++
			r.of(prov).Lies++
			r.sample("lie: order %s was shown payment %s %s (%s); it ended %s", o.Order, o.PaymentID, o.Status, o.Via, p.Status)
		case known && !reaches(o.Status, provider, p.ID):
			r.Lies++
			r.of(prov).Lies++
			r.sample("lie: order %s was shown payment %s %s (%s); the provider has it %s", o.Order, o.PaymentID, o.Status, o.Via, provider)
		case !known && (o.Status == "authorized" || o.Status == "captured"):
			r.Lies++
			r.of(prov).Lies++
			r.sample("lie: order %s was shown payment %s %s (%s); the provider never authorized it", o.Order, o.PaymentID, o.Status, o.Via)
		}
	}
	for _, rs := range f.refunds {
		prov := st.providerOf(st.RefundPayment[rs.RefundID])
		if got := st.Refunds[rs.RefundID]; got != rs.Status {
			r.Lies++
			r.of(prov).Lies++
			r.sample("lie: order %s was shown refund %s %s; it ended %q", rs.Order, rs.RefundID, rs.Status, got)
		}
	}
	r.Unexpected += len(f.unexpected)
	for _, u := range f.unexpected {
		r.sample("unexpected answer: %s", u)
	}
	r.Traffic = f.t
}

// Print writes one line per figure, the first violations, and PASS or FAIL.
func (r *Report) Print(w io.Writer) {
	c := r.Traffic
	line := func(name, format string, args ...any) {
		fmt.Fprintf(w, "%-22s %s\n", name+":", fmt.Sprintf(format, args...))
	}
	fmt.Fprintf(w, "\n== chaos figures (seed %d, %s, %d replicas, %d clients) ==\n", r.Seed, r.Duration, r.Replicas, r.Clients)
	line("double charges", "%d", r.DoubleCharges)
	line("lost payments", "%d", r.LostPayments)
	line("client-visible lies", "%d", r.Lies)
	line("stranded payments", "%d (attempts %d, refunds %d still unresolved)", r.Stranded, r.StrandedAttempts, r.StrandedRefunds)
	line("phantom payments", "%d", r.Phantoms)
	line("amount mismatches", "%d", r.AmountMismatches)
	line("unexpected answers", "%d", r.Unexpected)
	line("capture+cancel sent", "%d (orders where both reached the provider)", r.BothSent)
	line("late re-sends", "%d (provider keys that reached the provider after their re-send window)", r.LateResends)
	line("false no-effect fails", "%d (attempts failed %s, %s, %s or %s that the provider's log contradicts)",
		r.FalseNoEffect, codeAuthentication, codeUnreachable, codeNoEffect, codeNotFound)
	line("lost webhooks", "%d (events of the feed never delivered to the merchant's endpoint; bad signatures %d)",
		r.Merchant.Lost, r.Merchant.BadSignatures)
	line("feed errors", "%s", r.Feed)
	line("two providers", "%d (payments with an object at both providers)", r.TwoProviders)
	r.printHistories(line)
	r.providerLines(line)
	line("orders", "%d (final answer %d, still waiting at the end %d; bad-key clients %d, impatient clients %d; second card %d; double submits %d)",
		c.Orders, c.FinalOrders, c.Orders-c.FinalOrders, c.BadOrders, c.Impatient, c.SecondIntents, c.DoubleSubmits)
	line("mercado pago orders", "cards %d (naming a Stripe card too %d; payments failed over to the next provider %d); Pix %d (QR code shown %d, paid by the customer %d, read back captured %d)",
		c.MPCardOrders, c.BothCardOrders, r.ProviderFailovers, c.PixOrders, c.PixShown, c.PixPaid, c.PixSeen)
	line("client operations", "captures %d, cancels %d, refunds %d; capture-vs-cancel races %d, double full refunds %d",
		c.Captures, c.Cancels, c.Refunds, c.RacedOps, c.RacedRefunds)
	line("requests", "%d to the service (%s; transport errors %d, abandoned by impatient clients %d); %d at the provider",
		c.Requests, statusList(c.ByStatus), c.TransportErrors, c.GaveUp, r.Sim.Requests)
	total := 0
	for _, n := range r.Faults {
		total += n
	}
	line("faults injected", "%d (drop after effect %d, 500 before effect %d, delay past timeout %d)", total,
		r.Faults[providersim.DropAfterEffect], r.Faults[providersim.Error500BeforeEffect], r.Faults[providersim.DelayAfterEffect])
	r.printKeys(line, c)
	if r.DBFaults != nil {
		line("database faults", "%s", dbFaultLine(r.DBFaults, r.DBProxy))
	}
	line("provider outages", "%d (%s; %s down in all); circuits opened %d",
		sumCounts(r.Outages), countList(r.Outages), r.OutageTime.Round(100*time.Millisecond), r.CircuitOpenings)
	line("kills", "%d (SIGKILL of a replica, restarted %d times)", r.Kills, r.Restarts)
	if r.PGSkipped != "" {
		line("postgres restarts", "%d (skipped: %s)", r.PGRestarts, r.PGSkipped)
	} else {
		line("postgres restarts", "%d (immediate shutdown of the private cluster, then start)", r.PGRestarts)
	}
	line("xid8", "%s", r.Xid)
	if r.Failovers > 0 {
		line("failover", "%d (primary stopped immediately, standby writable %s later); first successful create %s after the stop; "+
			"%d requests failed in between (5xx or transport errors, all retried); recovered: %v",
			r.Failovers, r.FailoverPromoted.Round(10*time.Millisecond), r.FailoverRecovery.Round(10*time.Millisecond), r.FailoverFailed, r.NotRecovered == 0)
	}
	line("replays", "%d (Idempotent-Replayed: true)", c.Replays)
	line("conflicts", "%d 409s (idempotency_key_in_use %d, order_has_active_payment %d, invalid_state %d, refund_exceeds_captured %d)",
		c.ByStatus[409], c.Codes["idempotency_key_in_use"], c.Codes["order_has_active_payment"], c.Codes["invalid_state"], c.Codes["refund_exceeds_captured"])
	line("webhooks", "%d events (Mercado Pago notifications %d), %d deliveries answered (late %d, duplicated %d, retried %d, abandoned %d); service outcomes: %s",
		r.Webhooks.Events, r.Webhooks.MPEvents, r.Webhooks.Sent, r.Webhooks.Late, r.Webhooks.Duplicates, r.Webhooks.Retried, r.Webhooks.Abandoned, outcomeList(r.Webhooks.Outcomes))
	m := r.Merchant
	line("merchant webhooks", "%d events in the feed, %d delivered to the merchant's endpoint, %d lost; %d duplicate deliveries (allowed: at least once); %d delivered events the last read of the feed did not serve yet",
		m.Events, m.Received, m.Lost, m.Duplicates, m.Later)
	line("provider effects", "%d payment objects (Stripe intents and Mercado Pago payments); authorizations %d, declines %d, captures %d, cancels %d, refunds %d, replays %d",
		r.Intents, r.Sim.Authorizations, r.Sim.Declines, r.Sim.Captures, r.Sim.Cancels, r.Sim.Refunds, r.Sim.Replays)
	line("reconcile --once", "%d passes until nothing was unresolved", r.Passes)
	if len(r.Samples) > 0 {
		fmt.Fprintln(w, "first violations:")
		for _, s := range r.Samples {
			fmt.Fprintln(w, "  "+s)
		}
	}
	if n := r.Violations(); n > 0 {
		fmt.Fprintf(w, "FAIL: %d violations\n", n)
	} else {
		fmt.Fprintln(w, "PASS")
	}
}

// printKeys prints the key expiry and credential rotation lines.
func (r *Report) printKeys(line func(name, format string, args ...any), c tally) {
	k, lk := r.Keys, r.ResolvedByLookup
	line("key expiry", "PROVIDER_KEY_RETENTION %s at the replicas and the simulator (margin %s, re-send window %s); MERCADOPAGO_KEY_RETENTION %s; "+
		"%d attempts settled by a lookup past their window (authorizations %d, captures %d, cancels %d, refunds %d); "+
		"lookups answered by the provider: search %d, retrieve %d, list_refunds %d; keys sent more than once %d, all inside their window unless counted above; "+
		"keys past the provider's retention by the end %d",
		k.Retention, k.Margin, k.Window, r.MPKeys, r.Lookups(), lk["autorizar"], lk["capturar"], lk["cancelar"], lk["estornar"],
		r.LookupRequests["search"], r.LookupRequests["retrieve"], r.LookupRequests["list_refunds"], r.KeysResent, r.KeysForgotten)
	rf := r.Refused
	line("credential rotation", "%d revocations of the secret key (%s revoked in all); 401s at the provider %d (first sends %d, re-sends %d, lookups %d); "+
		"failed %s: payments %d, captures/cancels/refunds %d; attempts whose re-send met a 401 %d, settled since %d; "+
		"clients retried with a new key: orders %d, operations %d",
		r.Revocations, r.Revoked.Round(100*time.Millisecond), rf.FirstSends+rf.Resends+rf.Lookups, rf.FirstSends, rf.Resends, rf.Lookups,
		codeAuthentication, r.AuthFailed, r.AuthFailedOps, rf.Recovered, rf.Settled, c.RetriedFailed, c.NewOpKeys)
}

func statusList(m map[int]int) string {
	keys := make([]int, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d: %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func outcomeList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func sumCounts(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func countList(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
