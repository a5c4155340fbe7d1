package apitest

import (
	"context"
	"testing"

	"github.com/acmepay/payments/internal/notify"
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
	w := rivertest.NewWorker(t, riverpgxv5.New(e.DB.Pool), &river.Config{}, river.Worker[notify.DeliverArgs](e.WebhookWorker))
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
