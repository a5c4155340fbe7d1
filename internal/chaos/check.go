package chaos

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

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

	Traffic    tally
	Webhooks   webhookTally
	Deliveries map[string]int // stored webhook deliveries by outcome
	Sim        providersim.Stats
	Faults     map[providersim.FaultKind]int
	Kills      int
	Restarts   int
	PGRestarts int
	PGSkipped  string
	Passes     int // reconcile --once passes
	Intents    int

	Samples []string // the first violations, for diagnosis
}

// Violations is the number of invariant breaches.
func (r *Report) Violations() int {
	return r.DoubleCharges + r.LostPayments + r.Phantoms + r.AmountMismatches + r.Lies +
		r.Stranded + r.StrandedAttempts + r.StrandedRefunds + r.Unexpected + r.BothSent
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
// racing on one payment, exactly one may reach the provider.
func (r *Report) checkRaces(reqs []providersim.Request) {
	sent := map[string]map[string]bool{} // order -> capturar/cancelar
	for _, q := range reqs {
		if q.Op != "capture" && q.Op != "cancel" {
			continue
		}
		order, op, ok := strings.Cut(q.IdempotencyKey, ":")
		if !ok {
			continue
		}
		op, _, _ = strings.Cut(op, "-")
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

// check compares the provider's effects, the database and what clients
// were shown.
func (r *Report) check(intents []providersim.Intent, st *localState, f *fleet) {
	r.Intents = len(intents)
	byOrder := map[string][]string{}
	for _, in := range intents {
		if !authorizedAtProvider(in) {
			continue
		}
		order := in.Metadata["order_id"]
		byOrder[order] = append(byOrder[order], in.ID)
		p := st.ByProviderID[in.ID]
		if p == nil {
			p = st.Payments[in.Metadata["payment_id"]]
		}
		want := localFor[in.Status]
		switch {
		case p == nil:
			r.LostPayments++
			r.sample("lost payment: intent %s (%s, order %s, payment_id %s) has no local payment", in.ID, in.Status, order, in.Metadata["payment_id"])
			continue
		case p.Status != want:
			r.LostPayments++
			r.sample("lost payment: intent %s is %s at the provider, payment %s is %s locally (want %s)", in.ID, in.Status, p.ID, p.Status, want)
			continue
		}
		if in.Status == "succeeded" && (p.AmountCaptured != in.AmountReceived || p.AmountRefunded != in.AmountRefunded) {
			r.AmountMismatches++
			r.sample("amounts: payment %s captured %d refunded %d locally, %d and %d at the provider (intent %s)",
				p.ID, p.AmountCaptured, p.AmountRefunded, in.AmountReceived, in.AmountRefunded, in.ID)
		}
	}
	orders := make([]string, 0, len(byOrder))
	for o := range byOrder {
		orders = append(orders, o)
	}
	sort.Strings(orders)
	for _, o := range orders {
		if ids := byOrder[o]; len(ids) > 1 {
			r.DoubleCharges++
			r.sample("double charge: order %s authorized %d times at the provider: %s", o, len(ids), strings.Join(ids, ", "))
		}
	}
	intentByID := make(map[string]providersim.Intent, len(intents))
	for _, in := range intents {
		intentByID[in.ID] = in
	}
	for _, p := range st.Payments {
		switch p.Status {
		case "authorized", "captured", "canceled":
		default:
			continue
		}
		if in, ok := intentByID[p.ProviderID]; ok && authorizedAtProvider(in) {
			continue // a state mismatch was counted as a lost payment above
		}
		r.Phantoms++
		r.sample("phantom: payment %s (order %s) is %s locally; the provider shows no such authorization (intent %q)", p.ID, p.OrderID, p.Status, p.ProviderID)
	}

	// What the provider says became of each payment (by metadata
	// payment_id): the truth a client's answer is held against too.
	truth := map[string]string{}
	for _, in := range intents {
		pid := in.Metadata["payment_id"]
		switch {
		case authorizedAtProvider(in):
			truth[pid] = localFor[in.Status]
		case in.Status == "requires_payment_method" && in.LatestCharge != "" && truth[pid] == "":
			truth[pid] = "declined"
		}
	}

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
		switch {
		case p == nil:
			r.Lies++
			r.sample("lie: order %s was shown payment %s %s (%s), which the database does not have", o.Order, o.PaymentID, o.Status, o.Via)
		case !reaches(o.Status, p.Status, p.ID):
			r.Lies++
			r.sample("lie: order %s was shown payment %s %s (%s); it ended %s", o.Order, o.PaymentID, o.Status, o.Via, p.Status)
		case known && !reaches(o.Status, provider, p.ID):
			r.Lies++
			r.sample("lie: order %s was shown payment %s %s (%s); the provider has it %s", o.Order, o.PaymentID, o.Status, o.Via, provider)
		case !known && (o.Status == "authorized" || o.Status == "captured"):
			r.Lies++
			r.sample("lie: order %s was shown payment %s %s (%s); the provider never authorized it", o.Order, o.PaymentID, o.Status, o.Via)
		}
	}
	for _, rs := range f.refunds {
		if got := st.Refunds[rs.RefundID]; got != rs.Status {
			r.Lies++
			r.sample("lie: order %s was shown refund %s %s; it ended %q", rs.Order, rs.RefundID, rs.Status, got)
		}
	}
	r.Unexpected += len(f.unexpected)
	for _, u := range f.unexpected {
		r.sample("unexpected answer: %s", u)
	}
	r.Traffic = f.t
	r.Stranded, r.StrandedAttempts, r.StrandedRefunds = st.UnresolvedPayments, st.UnresolvedAttempts, st.UnresolvedRefunds
	if r.Stranded+r.StrandedAttempts+r.StrandedRefunds > 0 {
		r.sample("stranded: %d payments, %d attempts, %d refunds still processing/unknown after reconciliation",
			r.Stranded, r.StrandedAttempts, r.StrandedRefunds)
	}
	r.Deliveries = st.Deliveries
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
	line("orders", "%d (final answer %d, still waiting at the end %d; bad-key clients %d, impatient clients %d; second card %d; double submits %d)",
		c.Orders, c.FinalOrders, c.Orders-c.FinalOrders, c.BadOrders, c.Impatient, c.SecondIntents, c.DoubleSubmits)
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
	line("kills", "%d (SIGKILL of a replica, restarted %d times)", r.Kills, r.Restarts)
	if r.PGSkipped != "" {
		line("postgres restarts", "%d (skipped: %s)", r.PGRestarts, r.PGSkipped)
	} else {
		line("postgres restarts", "%d (immediate shutdown of the private cluster, then start)", r.PGRestarts)
	}
	line("replays", "%d (Idempotent-Replayed: true)", c.Replays)
	line("conflicts", "%d 409s (idempotency_key_in_use %d, order_has_active_payment %d, invalid_state %d, refund_exceeds_captured %d)",
		c.ByStatus[409], c.Codes["idempotency_key_in_use"], c.Codes["order_has_active_payment"], c.Codes["invalid_state"], c.Codes["refund_exceeds_captured"])
	line("webhooks", "%d events, %d deliveries answered (late %d, duplicated %d, retried %d, abandoned %d); service outcomes: %s",
		r.Webhooks.Events, r.Webhooks.Sent, r.Webhooks.Late, r.Webhooks.Duplicates, r.Webhooks.Retried, r.Webhooks.Abandoned, outcomeList(r.Webhooks.Outcomes))
	line("provider effects", "%d intents; authorizations %d, declines %d, captures %d, cancels %d, refunds %d, replays %d",
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
