package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/acmepay/payments/internal/postgres/pgfault"
)

// Faults between the replicas and PostgreSQL: a proxy in front of the
// database loses a COMMIT's answer (the commit happened, the replica never
// hears it), resets a connection before a statement or all of them, stalls,
// blackholes or slows every connection for a moment. The statements named
// are the money path's transactions: reserve, settle, a provider event's
// apply, the reconciler's claim and its recording.
var dbCommits = []string{
	"-- name: PaymentInsertWithAttempt ", "-- name: IdempotencyKeyComplete ", "-- name: ProviderEventReceiptInsert ",
	"-- name: AttemptScheduleClaim ", "-- name: AttemptUpdateOutcomeWithPayment ",
}

// Bounds of the faults that last: shorter than a client's patience, longer
// than a round trip.
const (
	minDBFault = 300 * time.Millisecond
	maxDBFault = 2 * time.Second
)

type dbFaults struct {
	px *pgfault.Proxy

	mu    sync.Mutex
	count map[string]int
}

// startDBFaults puts the proxy in front of the database of dbURL and
// returns the URL the replicas use.
func startDBFaults(dbURL string) (*dbFaults, string, error) {
	u, err := url.Parse(dbURL)
	if err != nil || strings.Contains(u.Host, ",") {
		return nil, "", fmt.Errorf("chaos: database faults need one host: %q", dbURL)
	}
	px, err := pgfault.Start(u.Host)
	if err != nil {
		return nil, "", err
	}
	return &dbFaults{px: px, count: map[string]int{}}, px.URL(dbURL), nil
}

// run arms a fault a mean of every apart until ctx is done, and clears
// every fault before it returns.
func (d *dbFaults) run(ctx context.Context, every time.Duration, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 0xdbfa))
	defer d.px.Clear()
	for {
		sleep(ctx, every/2+time.Duration(rng.Int64N(int64(every))))
		if ctx.Err() != nil {
			return
		}
		hold := minDBFault + time.Duration(rng.Int64N(int64(maxDBFault-minDBFault)))
		kind := ""
		switch rng.IntN(6) {
		case 0, 1:
			kind = "commit answer lost"
			d.px.DropCommitAnswer(dbCommits[rng.IntN(len(dbCommits))], 1)
		case 2:
			kind = "reset before a statement"
			d.px.ResetOnStatement(dbCommits[rng.IntN(len(dbCommits))], 1)
		case 3:
			kind = "every connection reset"
			d.px.ResetAll()
		case 4:
			kind = "stall"
			d.px.Stall(hold)
		default:
			kind = "slow"
			d.px.Slow(20*time.Millisecond, hold)
		}
		d.mu.Lock()
		d.count[kind]++
		d.mu.Unlock()
		sleep(ctx, hold)
		// An armed fault whose statement never came is dropped.
		d.px.Clear()
	}
}

// figures is what the proxy did: the faults armed by kind, the COMMIT
// answers lost and the connections reset.
func (d *dbFaults) figures() (map[string]int, pgfault.Stats) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]int, len(d.count))
	for k, v := range d.count {
		out[k] = v
	}
	return out, d.px.Stats()
}

func (d *dbFaults) close() { d.px.Close() }

// dbFaultLine is the report's line.
func dbFaultLine(armed map[string]int, st pgfault.Stats) string {
	keys := make([]string, 0, len(armed))
	for k := range armed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, armed[k])
	}
	return fmt.Sprintf("%d armed (%s); COMMIT answers lost %d of %d commits, connections reset %d, connections %d",
		sumCounts(armed), strings.Join(parts, ", "), st.CommitsDropped, st.Commits, st.Resets, st.Connections)
}
