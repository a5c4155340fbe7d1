package chaos

import (
	"context"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// historyVerdicts are the history checkers' findings: each property is
// linearizable (yes), not (no), or not decided in time (unknown).
type historyVerdicts struct {
	Calls    int              // requests recorded
	Keys     linearTally      // each key's answers (porcupine)
	Payments linearTally      // each payment's statuses (porcupine)
	Feed     feedHistoryTally // the feed's and the webhooks' histories
	Ledger   ledgerTally      // the provider's ledger
}

// violations counts each "no".
func (v historyVerdicts) violations() int {
	return v.Keys.Illegal + v.Payments.Illegal + v.Feed.violations() + v.Ledger.violations()
}

// historyInputs is what the history checkers read: what the clients, the
// merchant and the feed's readers saw, and the end state.
type historyInputs struct {
	Calls     []call
	Hooks     []received
	Committed []string         // event ids in the database at the end
	Reads     map[int][]string // full reads of the feed by page size
	Full      []feedEntry      // a full read with payments and versions
	Resumes   []resumeRead
	Recs      []record
	Reqs      []providersim.Request
	State     *localState
}

// checkHistories runs every history checker and keeps the verdicts.
func (r *Report) checkHistories(in historyInputs) {
	finals := map[string]string{}
	if in.State != nil {
		for id, p := range in.State.Payments {
			finals[id] = p.Status
		}
	}
	sample := func(format string, args ...any) { r.sample(format, args...) }
	r.Histories = historyVerdicts{
		Calls:    len(in.Calls),
		Keys:     checkKeys(in.Calls, sample),
		Payments: checkPayments(in.Calls, finals, sample),
		Feed:     checkFeedHistory(in.Committed, in.Reads, in.Full, in.Resumes, in.Hooks, sample),
		Ledger:   checkLedger(in.Reqs, in.Recs, in.State, sample),
	}
}

// checkHistories reads the feed once more with cursors, then checks the
// recorded histories.
func (r *runner) checkHistories(ctx context.Context, stored []string, reads map[int][]string, recs []record, reqs []providersim.Request, st *localState) error {
	calls, _ := r.fleet.hist.snapshot()
	_, hooks := r.shop.hist.snapshot()
	full, pos, err := readFeedHistory(ctx, r.shop, r.urls[0], r.apiKey, 7, "")
	if err != nil {
		return err
	}
	resumes, err := resumeFeed(ctx, r.shop, r.urls[0], r.apiKey, full, pos, hooks)
	if err != nil {
		return err
	}
	r.rep.checkHistories(historyInputs{Calls: calls, Hooks: hooks, Committed: stored, Reads: reads,
		Full: full, Resumes: resumes, Recs: recs, Reqs: reqs, State: st})
	return nil
}

// printHistories writes the verdicts, one line per property.
func (r *Report) printHistories(line func(name, format string, args ...any)) {
	v := r.Histories
	line("history: keys", "linearizable %s (%d key histories, %d answers; not linearizable %d, undecided %d; %d answers lost, left out)",
		v.Keys.verdict(), v.Keys.Histories, v.Keys.Operations, v.Keys.Illegal, v.Keys.Unknown, v.Keys.Lost)
	line("history: payments", "linearizable %s (%d payment histories, %d operations; not linearizable %d, undecided %d; lost answers %d, kept for their visible effect %d)",
		v.Payments.verdict(), v.Payments.Histories, v.Payments.Operations, v.Payments.Illegal, v.Payments.Unknown, v.Payments.Lost, v.Payments.Settled)
	line("history: feed", "linearizable %s (%d full reads in one order, %d reads from a cursor; out of order %d, not resumable %d; %d webhooks, of uncommitted events %d)",
		yesNo(v.Feed.violations() == 0 && r.Feed.Errors() == 0 && r.Merchant.Lost == 0), v.Feed.Reads, v.Feed.Resumes,
		v.Feed.OutOfOrder, v.Feed.NotResumable, v.Feed.Hooks, v.Feed.Uncommitted)
	line("history: ledger", "linearizable %s (%d provider keys, %d attempts with an object; keys that acted twice %d, second charges %d)",
		yesNo(v.Ledger.violations() == 0), v.Ledger.Keys, v.Ledger.Attempts, v.Ledger.TwoEffects, v.Ledger.SecondCharges)
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
