package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ahead holds the answers of reads sent ahead of their calls (see
// readAhead), or read with the statement before them. Each is used once, by
// the call it names, and only while the transaction has queued nothing
// since it was read: then the call would have read the same.
type ahead struct {
	attempt   *answer[dbsqlc.Attempt]
	attemptOf string
	// endpoints of the account, read with the transaction's first
	// statement and used for all its webhooks: the transaction never
	// writes endpoints, and a read at the event would race the same way
	// with transactions that change them, only a few milliseconds later.
	endpoints        *answer[[]dbsqlc.WebhookEndpointsEnabledRow]
	endpointsAccount string
	// at is the transaction's statement count when the answers arrived.
	at int
}

type answer[T any] struct {
	v   T
	err error
}

// take returns a's answer if it holds, and forgets it.
func take[T any](a **answer[T], fresh, match bool) (*answer[T], bool) {
	got := *a
	*a = nil
	if got == nil || !fresh || !match {
		return nil, false
	}
	return got, true
}

// reads names reads a business-sized store method makes right after its
// next statement, in this order and nothing in between: they are sent with
// that statement, in one round trip, and the calls are answered from them.
type reads struct {
	// attempt: AttemptGetByID of this attempt id.
	attempt string
}

// readAhead queues the reads r names to follow the next statement.
func (t *paymentTx) readAhead(r reads) {
	if id := r.attempt; id != "" {
		readAheadQuery(t, func(q *dbsqlc.Queries) error {
			v, err := q.AttemptGetByID(context.Background(), id)
			if !errors.Is(err, errRecorded) {
				t.ahead.attempt, t.ahead.attemptOf = &answer[dbsqlc.Attempt]{v, err}, id
			}
			return err
		})
	}
}

// endpointsAhead reads the account's webhook endpoints with the next
// statement, once per transaction, unless that statement's own row
// carries them (endpointsRead).
func (t *paymentTx) endpointsAhead(accountID string) {
	if t.ahead.endpointsAccount != "" {
		return
	}
	t.ahead.endpointsAccount = accountID
	readAheadQuery(t, func(q *dbsqlc.Queries) error {
		v, err := q.WebhookEndpointsEnabled(context.Background(), accountID)
		if !errors.Is(err, errRecorded) {
			t.ahead.endpoints = &answer[[]dbsqlc.WebhookEndpointsEnabledRow]{v, err}
		}
		return err
	})
}

// endpointsRead keeps the account's endpoints a statement returned as a
// JSON column, [{"id": …, "events": […]}], for the transaction's webhooks.
func (t *paymentTx) endpointsRead(accountID string, b []byte) error {
	var es []struct {
		ID     string   `json:"id"`
		Events []string `json:"events"`
	}
	if err := json.Unmarshal(b, &es); err != nil {
		return fmt.Errorf("postgres: webhook endpoints: %w", err)
	}
	rows := make([]dbsqlc.WebhookEndpointsEnabledRow, len(es))
	for i, e := range es {
		rows[i] = dbsqlc.WebhookEndpointsEnabledRow{ID: e.ID, EnabledEvents: e.Events}
	}
	t.ahead.endpoints, t.ahead.endpointsAccount = &answer[[]dbsqlc.WebhookEndpointsEnabledRow]{v: rows}, accountID
	return nil
}

// matching is WebhookEndpointsMatching from the endpoints read ahead; false
// when they were not read.
func (t *paymentTx) matching(accountID, eventType string) ([]string, bool) {
	a := t.ahead.endpoints
	if a == nil || a.err != nil || t.ahead.endpointsAccount != accountID {
		return nil, false
	}
	var ids []string
	for _, e := range a.v {
		if slices.Contains(e.EnabledEvents, eventType) || slices.Contains(e.EnabledEvents, "*") {
			ids = append(ids, e.ID)
		}
	}
	return ids, true
}

// arrived marks the answers read ahead as current: call it right after the
// statement they followed.
func (t *paymentTx) arrived() { t.ahead.at = t.tx.sent }

func (t *paymentTx) fresh() bool { return t.tx.sent == t.ahead.at }

// readAheadQuery queues run, a sqlc query, as a read ahead. run is called
// twice: on a recorder, to learn its statement and arguments, then on the
// answer. A missing row is an answer; any other failure fails the batch.
func readAheadQuery(t *paymentTx, run func(*dbsqlc.Queries) error) {
	rec := &recorder{}
	_ = run(dbsqlc.New(rec))
	t.tx.readAhead(rec.sql, rec.args, func(rows pgx.Rows) error {
		err := run(dbsqlc.New(rowsDB{rows}))
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		return err
	})
}

var errRecorded = errors.New("postgres: recorded")

// recorder takes down a query instead of running it.
type recorder struct {
	sql  string
	args []any
}

func (r *recorder) Exec(_ context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	r.sql, r.args = sql, args
	return pgconn.CommandTag{}, errRecorded
}

func (r *recorder) Query(_ context.Context, sql string, args ...any) (pgx.Rows, error) {
	r.sql, r.args = sql, args
	return nil, errRecorded
}

func (r *recorder) QueryRow(_ context.Context, sql string, args ...any) pgx.Row {
	r.sql, r.args = sql, args
	return errRow{errRecorded}
}

// rowsDB answers a query with rows already received.
type rowsDB struct{ rows pgx.Rows }

func (d rowsDB) Exec(context.Context, string, ...any) (pgconn.CommandTag, error) {
	return pgconn.CommandTag{}, errors.New("postgres: no statement to run here")
}

func (d rowsDB) Query(context.Context, string, ...any) (pgx.Rows, error) { return d.rows, nil }

func (d rowsDB) QueryRow(context.Context, string, ...any) pgx.Row { return rowsRow(d) }

type rowsRow struct{ rows pgx.Rows }

func (r rowsRow) Scan(dest ...any) error {
	if !r.rows.Next() {
		if err := r.rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	return r.rows.Scan(dest...)
}
