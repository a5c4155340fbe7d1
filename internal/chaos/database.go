package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
)

// serverURL is the PostgreSQL server the run's database is created on:
// TEST_DATABASE_URL when set, else what scripts/pg.sh url prints (the
// server on 127.0.0.1:5432, or the repository's private cluster).
func serverURL(ctx context.Context, root string) (string, error) {
	if u := os.Getenv("TEST_DATABASE_URL"); u != "" {
		return u, nil
	}
	cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "pg.sh"), "url")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("chaos: scripts/pg.sh url: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// withDatabase returns the URL with its database name replaced.
func withDatabase(server, name string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", fmt.Errorf("chaos: the database server must be a postgres:// URL, got %q", server)
	}
	u.Path = "/" + name
	return u.String(), nil
}

// createDatabase makes a fresh, empty database chaos_<random> on the server.
func createDatabase(ctx context.Context, server string) (name, dbURL string, err error) {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	name = "chaos_" + hex.EncodeToString(b)
	if dbURL, err = withDatabase(server, name); err != nil {
		return "", "", err
	}
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", "", fmt.Errorf("chaos: connect to %s: %w", server, err)
	}
	defer conn.Close(ctx)
	// DDL on a name of its own: no query for sqlc.
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", "", fmt.Errorf("chaos: create database: %w", err)
	}
	return name, dbURL, nil
}

func dropDatabase(ctx context.Context, server, name string) error {
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// localPayment is a payment as the service stored it.
type localPayment struct {
	ID, OrderID, Status, ProviderID string
	Provider                        string
	FailureCode                     string
	Attempt                         int
	AmountCaptured, AmountRefunded  int64
}

// localAttempt is one try at the provider, as the service stored it.
type localAttempt struct {
	ID, PaymentID, Operation, ProviderKey, Status, FailureCode string
	Provider                                                   string
	Number                                                     int // of its operation for the order
}

// localState is what the database holds once the run is over. It is read
// directly, not through the service, so the check does not trust the code
// under test.
type localState struct {
	Payments           map[string]*localPayment // by id
	ByProviderID       map[string]*localPayment
	Attempts           map[string]*localAttempt // by id
	Refunds            map[string]string        // refund id -> status
	RefundPayment      map[string]string        // refund id -> payment id
	UnresolvedPayments int
	UnresolvedAttempts int
	UnresolvedRefunds  int
	Deliveries         map[string]int // webhook delivery outcome -> count
}

// unresolved counts what reconciliation still has to settle. The checks
// read the database with SQL of their own, not the store's queries, so
// that they do not trust the code under test.
func unresolved(ctx context.Context, dbURL string) (payments, attempts, refunds int, err error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, 0, 0, err
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM payments WHERE status IN ('processing', 'unknown')),
		(SELECT count(*) FROM attempts WHERE status IN ('processing', 'unknown')),
		(SELECT count(*) FROM refunds WHERE status IN ('processing', 'unknown'))`).Scan(&payments, &attempts, &refunds)
	return payments, attempts, refunds, err
}

func newLocalState() *localState {
	return &localState{Payments: map[string]*localPayment{}, ByProviderID: map[string]*localPayment{},
		Attempts: map[string]*localAttempt{}, Refunds: map[string]string{}, RefundPayment: map[string]string{},
		Deliveries: map[string]int{}}
}

func loadLocalState(ctx context.Context, dbURL string) (*localState, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	st := newLocalState()
	rows, err := conn.Query(ctx, `SELECT id, order_id, status, coalesce(provider_payment_id, ''), coalesce(failure_code, ''),
		attempt, amount_captured, amount_refunded, provider FROM payments`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		p := &localPayment{}
		if err := rows.Scan(&p.ID, &p.OrderID, &p.Status, &p.ProviderID, &p.FailureCode, &p.Attempt, &p.AmountCaptured, &p.AmountRefunded, &p.Provider); err != nil {
			rows.Close()
			return nil, err
		}
		st.Payments[p.ID] = p
		if p.ProviderID != "" {
			st.ByProviderID[p.ProviderID] = p
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = conn.Query(ctx, `SELECT id, payment_id, operation, provider_key, status, coalesce(failure_code, ''), provider, number FROM attempts`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		a := &localAttempt{}
		if err := rows.Scan(&a.ID, &a.PaymentID, &a.Operation, &a.ProviderKey, &a.Status, &a.FailureCode, &a.Provider, &a.Number); err != nil {
			rows.Close()
			return nil, err
		}
		st.Attempts[a.ID] = a
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = conn.Query(ctx, `SELECT id, status, payment_id FROM refunds`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var id, status, pid string
		if err := rows.Scan(&id, &status, &pid); err != nil {
			rows.Close()
			return nil, err
		}
		st.Refunds[id], st.RefundPayment[id] = status, pid
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows, err = conn.Query(ctx, `SELECT outcome, count(*) FROM webhook_deliveries GROUP BY outcome`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var outcome string
		var n int
		if err := rows.Scan(&outcome, &n); err != nil {
			rows.Close()
			return nil, err
		}
		st.Deliveries[outcome] = n
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	st.UnresolvedPayments, st.UnresolvedAttempts, st.UnresolvedRefunds, err = unresolved(ctx, dbURL)
	return st, err
}

// providerOf is the provider of a local payment; Stripe's when unknown.
func (st *localState) providerOf(paymentID string) string {
	if p := st.Payments[paymentID]; p != nil && p.Provider != "" {
		return p.Provider
	}
	return provStripe
}

// failovers counts the payments whose authorization attempts ran at more
// than one provider.
func (st *localState) failovers() int {
	at := map[string]map[string]bool{}
	for _, a := range st.Attempts {
		if a.Operation != "autorizar" {
			continue
		}
		if at[a.PaymentID] == nil {
			at[a.PaymentID] = map[string]bool{}
		}
		at[a.PaymentID][a.Provider] = true
	}
	n := 0
	for _, provs := range at {
		if len(provs) > 1 {
			n++
		}
	}
	return n
}

// strandedBy counts, by provider, the payments, attempts and refunds still
// processing or unknown.
func (st *localState) strandedBy() map[string]int {
	out := map[string]int{}
	for _, p := range st.Payments {
		if !resolved(p.Status) {
			out[st.providerOf(p.ID)]++
		}
	}
	for _, a := range st.Attempts {
		if !resolved(a.Status) {
			prov := a.Provider
			if prov == "" {
				prov = st.providerOf(a.PaymentID)
			}
			out[prov]++
		}
	}
	for id, status := range st.Refunds {
		if !resolved(status) {
			out[st.providerOf(st.RefundPayment[id])]++
		}
	}
	return out
}
