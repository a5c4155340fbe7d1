package postgres

import (
	"context"
	"errors"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// pipeTx is a transaction that sends its statements in as few round trips
// as their answers allow. BEGIN, the timeouts and every statement nobody
// waits on (sqlc's :exec) are queued; they go out in one pipelined batch
// with the next statement whose rows are read, or with COMMIT. A failed
// queued statement fails that batch: the caller sees its error there, the
// transaction is aborted on the server, and the rollback ends it.
//
// It is a pgx.Tx, so that River inserts its jobs in it.
type pipeTx struct {
	conn  *pgx.Conn
	batch *pgx.Batch
	// begun: BEGIN has been sent, so the server holds a transaction.
	begun bool
	// done: committed or rolled back.
	done bool
	// unsent: the first batch failed before any byte of it was written
	// (pgconn.SafeToRetry), as on a pooled connection that broke while
	// idle: the server never saw the transaction.
	unsent bool
	// sent counts the statements queued so far; an answer read ahead holds
	// only while nothing was queued after it.
	sent int
	// ahead are reads queued to follow the next statement that is read.
	ahead []aheadRead
}

type aheadRead struct {
	sql  string
	args []any
	fn   func(pgx.Rows) error
}

func newPipeTx(conn *pgx.Conn, begin []string) *pipeTx {
	t := &pipeTx{conn: conn, batch: &pgx.Batch{}}
	for _, sql := range begin {
		t.batch.Queue(sql)
	}
	return t
}

var errTxDone = pgx.ErrTxClosed

// deferred reports whether sql can wait for the next batch: a sqlc :exec,
// whose caller reads nothing but the error.
func deferred(sql string) bool {
	first, _, _ := strings.Cut(sql, "\n")
	return strings.HasPrefix(first, "-- name: ") && strings.HasSuffix(strings.TrimSpace(first), " :exec")
}

// queue adds a statement to the next batch; fn, when set, reads its
// result when the batch is sent.
func (t *pipeTx) queue(sql string, args []any, fn func(pgx.Rows) error) {
	t.sent++
	q := t.batch.Queue(sql, args...)
	if fn != nil {
		q.Query(fn)
	}
}

// readAhead queues a read to go right after the next statement that is
// read, in its round trip; fn reads the answer before that statement's
// caller gets its own.
func (t *pipeTx) readAhead(sql string, args []any, fn func(pgx.Rows) error) {
	t.ahead = append(t.ahead, aheadRead{sql, args, fn})
}

// send sends the queued statements and reads the results of the first n;
// the caller reads the next one and closes the batch, which runs the
// functions of the rest.
func (t *pipeTx) send(ctx context.Context, n int) (pgx.BatchResults, error) {
	b := t.batch
	t.batch = &pgx.Batch{}
	first := !t.begun
	t.begun = true
	br := t.conn.SendBatch(ctx, b)
	for _, q := range b.QueuedQueries[:n] {
		var err error
		if q.Fn != nil {
			err = q.Fn(br)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			t.unsent = first && pgconn.SafeToRetry(err)
			_ = br.Close()
			return nil, err
		}
	}
	return br, nil
}

func (t *pipeTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.done {
		return pgconn.CommandTag{}, errTxDone
	}
	t.queue(sql, args, nil)
	if deferred(sql) {
		return pgconn.CommandTag{}, nil
	}
	br, err := t.send(ctx, len(t.batch.QueuedQueries)-1)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return execBatch(br)
}

func (t *pipeTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if t.done {
		return nil, errTxDone
	}
	t.queue(sql, args, nil)
	n := len(t.batch.QueuedQueries) - 1
	for _, r := range t.ahead {
		t.queue(r.sql, r.args, r.fn)
	}
	t.ahead = nil
	br, err := t.send(ctx, n)
	if err != nil {
		return nil, err
	}
	return queryBatch(br)
}

func (t *pipeTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	rows, err := t.Query(ctx, sql, args...)
	if err != nil {
		return errRow{err}
	}
	return (*batchRow)(rows.(*batchRows))
}

// Commit sends what is queued with COMMIT: a transaction whose statements
// were all queued costs one round trip, and one that ran nothing costs
// none.
func (t *pipeTx) Commit(ctx context.Context) error {
	if t.done {
		return errTxDone
	}
	if !t.begun && t.sent == 0 {
		t.done = true
		return nil
	}
	t.ahead = nil
	t.batch.Queue("COMMIT")
	br, err := t.send(ctx, len(t.batch.QueuedQueries)-1)
	if err != nil {
		return err
	}
	tag, err := execBatch(br)
	if err != nil {
		return err
	}
	t.done = true
	if tag.String() == "ROLLBACK" {
		// An earlier failure, ignored by the caller, had aborted it.
		return pgx.ErrTxCommitRollback
	}
	return nil
}

// Rollback ends the transaction unless it is over; after Commit it is a
// no-op that returns pgx.ErrTxClosed.
func (t *pipeTx) Rollback(ctx context.Context) error {
	if t.done {
		return errTxDone
	}
	t.done = true
	t.batch = &pgx.Batch{}
	if !t.begun || t.conn.PgConn().TxStatus() == 'I' {
		return nil
	}
	if _, err := t.conn.Exec(ctx, "ROLLBACK"); err != nil {
		// The pool drops a connection left in a transaction.
		_ = t.conn.Close(ctx)
		return err
	}
	return nil
}

// flush sends what is queued, for the calls that bypass the queue.
func (t *pipeTx) flush(ctx context.Context) error {
	if t.done {
		return errTxDone
	}
	if len(t.batch.QueuedQueries) == 0 {
		return nil
	}
	br, err := t.send(ctx, len(t.batch.QueuedQueries))
	if err != nil {
		return err
	}
	return br.Close()
}

func (t *pipeTx) Begin(context.Context) (pgx.Tx, error) {
	return nil, errors.New("postgres: no nested transactions in a pipelined transaction")
}

func (t *pipeTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.flush(ctx); err != nil {
		return 0, err
	}
	return t.conn.CopyFrom(ctx, table, columns, src)
}

func (t *pipeTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.flush(ctx); err != nil {
		return errBatch{err}
	}
	return t.conn.SendBatch(ctx, b)
}

func (t *pipeTx) LargeObjects() pgx.LargeObjects { return pgx.LargeObjects{} }

func (t *pipeTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if t.done {
		return nil, errTxDone
	}
	return t.conn.Prepare(ctx, name, sql)
}

func (t *pipeTx) Conn() *pgx.Conn { return t.conn }

// batchRows are the rows of a batch's last statement; the batch ends with
// them.
// execBatch reads the result of a batch's one statement that matters and
// closes the batch, reporting the first error.
func execBatch(br pgx.BatchResults) (pgconn.CommandTag, error) {
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// queryBatch returns the rows of a batch's statement; closing them closes
// the batch.
func queryBatch(br pgx.BatchResults) (pgx.Rows, error) {
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, err
	}
	return &batchRows{Rows: rows, br: br}, nil
}

type batchRows struct {
	pgx.Rows
	br     pgx.BatchResults
	closed bool
	err    error
}

func (r *batchRows) Next() bool {
	if r.Rows.Next() {
		return true
	}
	r.Close()
	return false
}

func (r *batchRows) Close() {
	if r.closed {
		return
	}
	r.closed = true
	r.Rows.Close()
	r.err = r.br.Close()
}

func (r *batchRows) Err() error {
	if err := r.Rows.Err(); err != nil {
		return err
	}
	return r.err
}

type batchRow batchRows

func (r *batchRow) Scan(dest ...any) error {
	rows := (*batchRows)(r)
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return pgx.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	rows.Close()
	return rows.Err()
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (b errBatch) Tx() pgx.Tx                       { return nil }
