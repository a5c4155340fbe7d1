package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/acmepay/payments/internal/metrics"
	"github.com/acmepay/payments/internal/notify"
	"github.com/acmepay/payments/internal/payment"
	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// River is the job queue of webhook deliveries, on this database.
type River = river.Client[pgx.Tx]

// newInserter is the insert-only River client every store enqueues with:
// no queues, no leader, no notifier, so it needs no session of its own and
// works through a transaction pooler.
func newInserter(pool *pgxpool.Pool, tp trace.TracerProvider) (*River, error) {
	return river.NewClient(riverpgxv5.New(pool), &river.Config{Middleware: RiverTracing(tp)})
}

// RiverTracing is River's OpenTelemetry middleware when tracing is on: an
// insert is a span whose context the job carries in its metadata, and the
// span that works the job links back to it.
func RiverTracing(tp trace.TracerProvider) []rivertype.Middleware {
	if tp == nil {
		return nil
	}
	return []rivertype.Middleware{otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(),
		EnableTracePropagation: true, EnableWorkSpanJobKindSuffix: true})}
}

// RiverWorkerConfig sets up the client that works deliveries in serve.
type RiverWorkerConfig struct {
	Worker *notify.Worker
	// PollOnly runs without LISTEN/NOTIFY, for a pool behind a transaction
	// pooler; otherwise the pool must be a direct one (the notifier and
	// leader election hold a session).
	PollOnly   bool
	MaxWorkers int
	PollEvery  time.Duration
	Logger     *slog.Logger
}

// NewRiverWorker returns a client that works webhook deliveries; Start it
// and Stop it with the service.
func NewRiverWorker(db *DB, c RiverWorkerConfig) (*River, error) {
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, c.Worker); err != nil {
		return nil, err
	}
	return river.NewClient(riverpgxv5.New(db.Pool), &river.Config{
		Queues:            map[string]river.QueueConfig{notify.Queue: {MaxWorkers: max(c.MaxWorkers, 1)}},
		Workers:           workers,
		PollOnly:          c.PollOnly,
		FetchPollInterval: c.PollEvery,
		MaxAttempts:       notify.MaxAttempts,
		// A job left running by a killed process is retried within about a
		// minute (the rescuer runs every 30 s on the leader), not an hour.
		JobTimeout:           notify.JobTimeout,
		RescueStuckJobsAfter: notify.RescueAfter,
		Logger:               c.Logger,
		Middleware:           RiverTracing(db.tracing),
	})
}

// riverMigrationLock serializes River's migrations between instances
// starting at once; a transaction lock, held by the migrating transaction.
const riverMigrationLock = 0x7269766572 // "river"

// migrateRiver applies River's own migrations, in one transaction on the
// migration connection settings (no statement or lock timeout).
func migrateRiver(ctx context.Context, db *DB) error {
	cfg := db.Pool.Config()
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	migrationParams(cfg.ConnConfig.RuntimeParams, db.timeouts)
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer pool.Close()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	return MigrateRiver(ctx, conn.Conn())
}

// MigrateRiver applies River's migrations on conn, one transaction per
// version (a later one uses an enum value an earlier one adds, which
// PostgreSQL refuses within one transaction), each under a transaction
// lock that serializes instances migrating at once.
func MigrateRiver(ctx context.Context, conn *pgx.Conn) error {
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return err
	}
	for _, v := range m.AllVersions() {
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if err := dbsqlc.New(tx).ServerAdvisoryXactLock(ctx, riverMigrationLock); err != nil {
				return err
			}
			// One version per transaction, the batching MigrateTx's
			// deprecation warns about avoided; the transaction carries the lock.
			//lint:ignore SA1019 see above
			_, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, &rivermigrate.MigrateOpts{TargetVersion: v.Version})
			return err
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// RiverMigrations counts River's migrations, for names of migrated
// templates.
func RiverMigrations() int {
	m, err := rivermigrate.New(riverpgxv5.New(nil), nil)
	if err != nil {
		return 0
	}
	return len(m.AllVersions())
}

// enqueueTx inserts one delivery job per enabled endpoint of the account
// that takes the event type, in the event's transaction: if it rolls back,
// nothing is sent.
func enqueueTx(ctx context.Context, r *River, tx pgx.Tx, q *dbsqlc.Queries, accountID, eventID, eventType string) error {
	ids, err := q.WebhookEndpointsMatching(ctx, dbsqlc.WebhookEndpointsMatchingParams{AccountID: accountID, Type: eventType})
	if err != nil {
		return translate(err)
	}
	return enqueueIDs(ctx, r, tx, accountID, eventID, ids)
}

// waiting are the states of a delivery job not yet over: a delivery of an
// event to an endpoint in one of them stands in for any other, so a
// redeliver never grows the queue while one waits.
var waiting = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateRunning, rivertype.JobStateScheduled}

// enqueueIDs inserts one delivery job per endpoint id, unless one for the
// same event and endpoint is waiting.
func enqueueIDs(ctx context.Context, r *River, tx pgx.Tx, accountID, eventID string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	params := make([]river.InsertManyParams, len(ids))
	for i, id := range ids {
		params[i] = river.InsertManyParams{
			Args: notify.DeliverArgs{AccountID: accountID, EndpointID: id, EventID: eventID},
			InsertOpts: &river.InsertOpts{Queue: notify.Queue, MaxAttempts: notify.MaxAttempts,
				UniqueOpts: river.UniqueOpts{ByArgs: true, ByState: waiting}},
		}
	}
	if _, err := r.InsertManyTx(ctx, tx, params); err != nil {
		return translate(err)
	}
	return nil
}

// WebhookStore keeps endpoints and attempts.
type WebhookStore struct{ db *DB }

// NewWebhookStore returns the store on db.
func NewWebhookStore(db *DB) *WebhookStore { return &WebhookStore{db: db} }

var (
	_ notify.Store         = (*WebhookStore)(nil)
	_ notify.DeliveryStore = (*WebhookStore)(nil)
)

func endpointFromRow(r dbsqlc.WebhookEndpoint) *notify.Endpoint {
	return &notify.Endpoint{ID: r.ID, AccountID: r.AccountID, URL: r.Url, EnabledEvents: r.EnabledEvents,
		Description: r.Description, Status: r.Status, SecretEnc: r.SecretEnc, PreviousSecretEnc: r.PreviousSecretEnc,
		PreviousExpiresAt: r.PreviousExpiresAt, CreateKeyHash: r.CreateKeyHash, CreateFingerprint: r.CreateFingerprint,
		RotateKeyHash: r.RotateKeyHash, FailingSince: r.FailingSince, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
}

// EndpointInsert stores e, or finds the endpoint created with its key; an
// account at limit gets notify.ErrTooManyEndpoints. The account's row is
// locked first, so two creations never both count the same endpoints.
func (s *WebhookStore) EndpointInsert(ctx context.Context, e *notify.Endpoint, limit int) (*notify.Endpoint, bool, error) {
	var (
		out     *notify.Endpoint
		created bool
	)
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		if _, err := q.AccountLockForEndpoints(ctx, e.AccountID); err != nil {
			return translate(err)
		}
		byKey := dbsqlc.WebhookEndpointByCreateKeyParams{AccountID: e.AccountID, CreateKeyHash: e.CreateKeyHash}
		row, err := q.WebhookEndpointByCreateKey(ctx, byKey)
		if err == nil {
			out = endpointFromRow(row)
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return translate(err)
		}
		n, err := q.WebhookEndpointCount(ctx, e.AccountID)
		if err != nil {
			return translate(err)
		}
		if n >= int64(limit) {
			return notify.ErrTooManyEndpoints
		}
		row, err = q.WebhookEndpointInsert(ctx, dbsqlc.WebhookEndpointInsertParams{
			ID: e.ID, AccountID: e.AccountID, Url: e.URL, EnabledEvents: e.EnabledEvents, Description: e.Description,
			SecretEnc: e.SecretEnc, CreateKeyHash: e.CreateKeyHash, CreateFingerprint: e.CreateFingerprint, Now: e.CreatedAt})
		if err != nil {
			return translate(err)
		}
		out, created = endpointFromRow(row), true
		return nil
	})
	return out, created, err
}

func (s *WebhookStore) WebhookEndpointGet(ctx context.Context, accountID, id string) (*notify.Endpoint, error) {
	row, err := s.db.q.WebhookEndpointGet(ctx, dbsqlc.WebhookEndpointGetParams{AccountID: accountID, ID: id})
	if err != nil {
		return nil, translate(err)
	}
	return endpointFromRow(row), nil
}

func (s *WebhookStore) WebhookEndpointGetAny(ctx context.Context, id string) (*notify.Endpoint, error) {
	row, err := s.db.q.WebhookEndpointGetAny(ctx, id)
	if err != nil {
		return nil, translate(err)
	}
	return endpointFromRow(row), nil
}

func (s *WebhookStore) WebhookEndpointList(ctx context.Context, accountID, after string, limit int) ([]*notify.Endpoint, error) {
	rows, err := s.db.q.WebhookEndpointList(ctx, dbsqlc.WebhookEndpointListParams{AccountID: accountID, AfterID: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*notify.Endpoint, len(rows))
	for i, r := range rows {
		out[i] = endpointFromRow(r)
	}
	return out, nil
}

// WebhookEndpointIDsByURL names the account's other live endpoints with
// this URL.
func (s *WebhookStore) WebhookEndpointIDsByURL(ctx context.Context, accountID, url, exceptID string) ([]string, error) {
	ids, err := s.db.q.WebhookEndpointIDsByURL(ctx, dbsqlc.WebhookEndpointIDsByURLParams{AccountID: accountID, Url: url, ExceptID: exceptID})
	if err != nil {
		return nil, translate(err)
	}
	return ids, nil
}

func (s *WebhookStore) WebhookEndpointListAll(ctx context.Context, after string, limit int) ([]*notify.Endpoint, error) {
	rows, err := s.db.q.WebhookEndpointListAll(ctx, dbsqlc.WebhookEndpointListAllParams{AfterID: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	out := make([]*notify.Endpoint, len(rows))
	for i, r := range rows {
		out[i] = endpointFromRow(r)
	}
	return out, nil
}

func (s *WebhookStore) EventAccount(ctx context.Context, eventID string) (string, error) {
	id, err := s.db.q.EventAccount(ctx, eventID)
	return id, translate(err)
}

// RedeliverAudited enqueues the event again for its matching endpoints and
// records who asked and why, in one transaction; it returns the event's
// account.
func (s *WebhookStore) RedeliverAudited(ctx context.Context, eventID string, a notify.DeliveryAuditEntry) (string, error) {
	var accountID string
	err := withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		var err error
		if accountID, err = q.EventAccount(ctx, eventID); err != nil {
			return translate(err)
		}
		ev, err := q.EventGetForDelivery(ctx, dbsqlc.EventGetForDeliveryParams{AccountID: accountID, ID: eventID})
		if err != nil {
			return translate(err)
		}
		if err := q.WebhookAuditInsert(ctx, dbsqlc.WebhookAuditInsertParams{AccountID: accountID, EventID: eventID,
			At: a.At, Actor: a.Actor, Action: a.Action, Reason: a.Reason, Details: []byte("{}")}); err != nil {
			return translate(err)
		}
		return enqueueTx(ctx, s.db.river, tx, q, accountID, eventID, ev.Type)
	})
	return accountID, err
}

func (s *WebhookStore) WebhookEndpointUpdate(ctx context.Context, e *notify.Endpoint, now time.Time) (*notify.Endpoint, error) {
	row, err := s.db.q.WebhookEndpointUpdate(ctx, dbsqlc.WebhookEndpointUpdateParams{
		Url: e.URL, EnabledEvents: e.EnabledEvents, Description: e.Description, Status: e.Status,
		Now: now, AccountID: e.AccountID, ID: e.ID})
	if err != nil {
		return nil, translate(err)
	}
	return endpointFromRow(row), nil
}

func (s *WebhookStore) WebhookEndpointDelete(ctx context.Context, accountID, id string, now time.Time) error {
	_, err := s.db.q.WebhookEndpointDelete(ctx, dbsqlc.WebhookEndpointDeleteParams{Now: &now, AccountID: accountID, ID: id})
	return translate(err)
}

func (s *WebhookStore) WebhookEndpointRotate(ctx context.Context, accountID, id string, secretEnc, keyHash []byte, previousExpiresAt, now time.Time) (*notify.Endpoint, error) {
	row, err := s.db.q.WebhookEndpointRotate(ctx, dbsqlc.WebhookEndpointRotateParams{
		PreviousExpiresAt: &previousExpiresAt, SecretEnc: secretEnc, RotateKeyHash: keyHash, Now: now,
		AccountID: accountID, ID: id})
	if err != nil {
		return nil, translate(err)
	}
	return endpointFromRow(row), nil
}

func webhookAttemptsFromRows(rows []dbsqlc.WebhookAttempt) []notify.Attempt {
	out := make([]notify.Attempt, len(rows))
	for i, r := range rows {
		out[i] = notify.Attempt{ID: r.ID, AccountID: r.AccountID, EndpointID: r.EndpointID, EventID: r.EventID,
			At: r.At, StatusCode: int(r.StatusCode), Duration: time.Duration(r.DurationMs) * time.Millisecond,
			Outcome: r.Outcome, Response: r.Response}
	}
	return out
}

func (s *WebhookStore) WebhookAttemptsByEndpoint(ctx context.Context, accountID, endpointID string, after int64, limit int) ([]notify.Attempt, error) {
	rows, err := s.db.q.WebhookAttemptsByEndpoint(ctx, dbsqlc.WebhookAttemptsByEndpointParams{
		AccountID: accountID, EndpointID: endpointID, AfterID: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	return webhookAttemptsFromRows(rows), nil
}

func (s *WebhookStore) WebhookAttemptsByEvent(ctx context.Context, accountID, eventID string, after int64, limit int) ([]notify.Attempt, error) {
	rows, err := s.db.q.WebhookAttemptsByEvent(ctx, dbsqlc.WebhookAttemptsByEventParams{
		AccountID: accountID, EventID: eventID, AfterID: after, MaxRows: int32(limit)})
	if err != nil {
		return nil, translate(err)
	}
	return webhookAttemptsFromRows(rows), nil
}

// Redeliver enqueues the event again for its matching endpoints.
func (s *WebhookStore) Redeliver(ctx context.Context, accountID, eventID string) error {
	return withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		ev, err := q.EventGetForDelivery(ctx, dbsqlc.EventGetForDeliveryParams{AccountID: accountID, ID: eventID})
		if err != nil {
			return translate(err)
		}
		return enqueueTx(ctx, s.db.river, tx, q, accountID, eventID, ev.Type)
	})
}

// DeliveryTarget reads the endpoint and the event's body: the event as the
// feed serves it with its cursor added.
func (s *WebhookStore) DeliveryTarget(ctx context.Context, a notify.DeliverArgs) (notify.Target, error) {
	e, err := s.db.q.WebhookEndpointGetAny(ctx, a.EndpointID)
	if err != nil {
		return notify.Target{}, translate(err)
	}
	ev, err := s.db.q.EventGetForDelivery(ctx, dbsqlc.EventGetForDeliveryParams{AccountID: a.AccountID, ID: a.EventID})
	if err != nil {
		return notify.Target{}, translate(err)
	}
	xid, err := strconv.ParseUint(ev.XidText, 10, 64)
	if err != nil {
		return notify.Target{}, fmt.Errorf("postgres: event xid: %w", err)
	}
	body, err := withCursor(ev.Payload, payment.FeedPosition{Xid: xid, Seq: ev.Seq}.String())
	if err != nil {
		return notify.Target{}, err
	}
	ep := endpointFromRow(e)
	if e.DeletedAt != nil {
		ep.Status = notify.StatusDisabled
	}
	t := notify.Target{Endpoint: ep, EventID: a.EventID, Body: body}
	if ev.PaymentID != nil {
		t.PaymentID = *ev.PaymentID
	}
	return t, nil
}

// withCursor appends "cursor" to the stored event object. jsonb gives the
// object back with its keys in its own order; the feed serves the same.
func withCursor(payload []byte, cursor string) ([]byte, error) {
	p := bytes.TrimSpace(payload)
	if len(p) < 2 || p[len(p)-1] != '}' {
		return nil, errors.New("postgres: event payload is not an object")
	}
	c, err := json.Marshal(cursor)
	if err != nil {
		return nil, err
	}
	out := append([]byte{}, p[:len(p)-1]...)
	if len(p) > 2 {
		out = append(out, ',')
	}
	out = append(out, `"cursor":`...)
	out = append(out, c...)
	return append(out, '}'), nil
}

// AttemptRecord stores an attempt and the endpoint's failing streak; an
// endpoint failing since before disableBefore is disabled, with its event.
func (s *WebhookStore) AttemptRecord(ctx context.Context, a notify.Attempt, disableBefore time.Time) error {
	return withTx(ctx, s.db, func(tx pgx.Tx) error {
		q := s.db.q.WithTx(tx)
		if err := q.WebhookAttemptInsert(ctx, dbsqlc.WebhookAttemptInsertParams{
			AccountID: a.AccountID, EndpointID: a.EndpointID, EventID: a.EventID, At: a.At,
			StatusCode: int32(a.StatusCode), DurationMs: a.Duration.Milliseconds(), Outcome: a.Outcome, Response: a.Response,
		}); err != nil {
			return translate(err)
		}
		if a.Outcome == notify.OutcomeSucceeded {
			return translate(q.WebhookEndpointDelivered(ctx, a.EndpointID))
		}
		since, err := q.WebhookEndpointFailed(ctx, dbsqlc.WebhookEndpointFailedParams{Now: &a.At, ID: a.EndpointID})
		if err != nil {
			return translate(err)
		}
		if since == nil || !since.Before(disableBefore) {
			return nil
		}
		row, err := q.WebhookEndpointDisable(ctx, dbsqlc.WebhookEndpointDisableParams{Now: a.At, ID: a.EndpointID})
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // already disabled
		}
		if err != nil {
			return translate(err)
		}
		ev := payment.Event{ID: payment.NewID("evt"), AccountID: a.AccountID, Type: "webhook_endpoint.disabled", CreatedAt: a.At}
		ev.Payload, err = json.Marshal(struct {
			ID              string `json:"id"`
			Type            string `json:"type"`
			CreatedAt       string `json:"created_at"`
			WebhookEndpoint any    `json:"webhook_endpoint"`
		}{ev.ID, ev.Type, payment.FormatTime(ev.CreatedAt), endpointFromRow(row).View()})
		if err != nil {
			return err
		}
		if err := q.EventInsert(ctx, dbsqlc.EventInsertParams{ID: ev.ID, AccountID: ev.AccountID, Type: ev.Type,
			Payload: ev.Payload, CreatedAt: ev.CreatedAt}); err != nil {
			return translate(err)
		}
		return enqueueTx(ctx, s.db.river, tx, q, ev.AccountID, ev.ID, ev.Type)
	})
}

// DeliveryState reads the gauges of outbound deliveries as of now.
func (s *WebhookStore) DeliveryState(ctx context.Context, now time.Time) (metrics.WebhookDeliveryState, error) {
	st := metrics.WebhookDeliveryState{ByEndpoint: map[string]time.Duration{}, Disabled: map[string]int64{}}
	rows, err := s.db.q.WebhookEndpointsPendingAge(ctx, dbsqlc.WebhookEndpointsPendingAgeParams{
		Now: now, MaxRows: int32(metrics.MaxEndpointSeries)})
	if err != nil {
		return st, translate(err)
	}
	for _, r := range rows {
		age := max(time.Duration(r.AgeSeconds*float64(time.Second)), 0)
		st.ByEndpoint[r.ID] = age
		st.OldestPending = max(st.OldestPending, age)
	}
	counts, err := s.db.q.WebhookEndpointsDisabledCount(ctx)
	if err != nil {
		return st, translate(err)
	}
	for _, c := range counts {
		reason := metrics.DisabledMerchant
		if c.Failing {
			reason = metrics.DisabledFailing
		}
		st.Disabled[reason] = c.N
	}
	return st, nil
}
