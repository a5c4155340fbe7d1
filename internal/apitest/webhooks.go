package apitest

import (
	"context"
	"testing"
	"time"

	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/postgres"
	"github.com/acmepay/payments/internal/postgres/postgrestest"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertest"
	"github.com/riverqueue/river/rivertype"
)

// WebhookJobs lists the delivery jobs in River's table, oldest first.
func (e *Env) WebhookJobs(t *testing.T) []*rivertype.JobRow {
	t.Helper()
	c, err := river.NewClient(riverpgxv5.New(e.DB.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.JobList(context.Background(), river.NewJobListParams().Kinds(notify.DeliverArgs{}.Kind()).First(1000))
	if err != nil {
		t.Fatal(err)
	}
	return res.Jobs
}

// WorkWebhookJob runs one attempt of a delivery job with the env's worker,
// through River's executor (retry policy, attempt count, final failure),
// whatever its scheduled time: the test decides when time has passed.
func (e *Env) WorkWebhookJob(t *testing.T, job *rivertype.JobRow) (*rivertest.WorkResult, error) {
	t.Helper()
	ctx := context.Background()
	w := rivertest.NewWorker(t, riverpgxv5.New(e.DB.Pool), &river.Config{Middleware: postgres.RiverTracing(e.Opts.TracerProvider)},
		river.Worker[notify.DeliverArgs](e.WebhookWorker))
	var (
		res    *rivertest.WorkResult
		jobErr error
	)
	err := pgx.BeginFunc(ctx, e.DB.Pool, func(tx pgx.Tx) error {
		res, jobErr = w.WorkJob(ctx, t, tx, job)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return res, jobErr
}

// StartRiverWorker runs the delivery worker as serve does, a River client
// working the queue on its own, until the test ends. It runs on the env's
// database URL; behind the pooler (TEST_POOLER=pgbouncer) that is the
// pooled one, so it runs poll-only, as serve does without a direct
// MIGRATE_DATABASE_URL: LISTEN/NOTIFY and the leader's session do not
// survive a transaction pooler.
func (e *Env) StartRiverWorker(t *testing.T) {
	t.Helper()
	opts := []postgres.Option{postgres.WithTracing(e.Opts.TracerProvider)}
	if postgrestest.Pooled(t) {
		to := postgrestest.PooledTimeouts
		opts = append(opts, postgres.WithSessionTimeouts(to[0], to[1], to[2]))
	}
	db, err := postgres.Open(context.Background(), e.DBURL, opts...)
	if err != nil {
		t.Fatalf("open database: %v", err)
	}
	t.Cleanup(db.Close)
	c, err := postgres.NewRiverWorker(db, postgres.RiverWorkerConfig{Worker: e.WebhookWorker,
		PollOnly: postgrestest.Pooled(t), MaxWorkers: 2, PollEvery: 200 * time.Millisecond, Logger: e.Logger()})
	if err != nil {
		t.Fatalf("river worker: %v", err)
	}
	if err := c.Start(context.Background()); err != nil {
		t.Fatalf("start river worker: %v", err)
	}
	// Registered after db.Close, so it runs before it.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
		defer cancel()
		if err := c.Stop(ctx); err != nil {
			t.Errorf("stop river worker: %v", err)
		}
	})
}
