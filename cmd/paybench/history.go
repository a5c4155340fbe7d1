package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// historyInfo describes the preloaded idempotency_keys table.
type historyInfo struct {
	Rows       int64
	TableSize  string
	IndexSize  string
	Load       time.Duration // inserts
	Index      time.Duration // index rebuilds
	Vacuum     time.Duration // VACUUM ANALYZE and CHECKPOINT
	Identical  bool          // the rebuilt indexes match the migrated ones
	IndexCount int
}

type indexDef struct{ name, def string }

func readIndexDefs(ctx context.Context, pool *pgxpool.Pool, name string) ([]indexDef, error) {
	rows, err := pool.Query(ctx, query(name))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []indexDef
	for rows.Next() {
		var d indexDef
		if err := rows.Scan(&d.name, &d.def); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// preloadHistory adds rows keys to idempotency_keys as a tenant with a long
// history would have them. Inserting ten million random keys into the
// unique index one by one takes several minutes on two cores, so the
// secondary indexes are dropped, the rows inserted in parallel chunks, and
// the same indexes (read back from the catalog, then checked) rebuilt by
// sorting, the unique one as full as random inserts would have left it.
// The service must be idle meanwhile.
func preloadHistory(ctx context.Context, pool *pgxpool.Pool, accountID string, rows int64, body []byte) (historyInfo, error) {
	info := historyInfo{Rows: rows}
	uniques, err := readIndexDefs(ctx, pool, "HistoryUniqueConstraints")
	if err != nil {
		return info, err
	}
	plain, err := readIndexDefs(ctx, pool, "HistoryPlainIndexes")
	if err != nil {
		return info, err
	}
	info.IndexCount = len(uniques) + len(plain)
	for _, u := range uniques {
		if _, err := pool.Exec(ctx, query("HistoryConstraintDrop", "name", u.name)); err != nil {
			return info, err
		}
	}
	for _, p := range plain {
		if _, err := pool.Exec(ctx, query("HistoryIndexDrop", "name", p.name)); err != nil {
			return info, err
		}
	}

	t := time.Now()
	const chunks = 2
	errs := make([]error, chunks)
	var wg sync.WaitGroup
	for c := range int64(chunks) {
		from, to := c*rows/chunks+1, (c+1)*rows/chunks
		wg.Go(func() { errs[c] = insertHistory(ctx, pool, accountID, from, to, rows, body) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return info, fmt.Errorf("history insert: %w", err)
	}
	info.Load = time.Since(t)

	t = time.Now()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return info, err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, query("HistorySessionSortMemory")); err != nil {
		return info, err
	}
	for _, u := range uniques {
		for _, q := range []string{query("HistoryConstraintAdd", "name", u.name, "def", u.def), query("HistoryIndexReset", "name", u.name)} {
			if _, err := conn.Exec(ctx, q); err != nil {
				return info, err
			}
		}
	}
	for _, p := range plain {
		if _, err := conn.Exec(ctx, query("HistoryIndexCreate", "def", p.def)); err != nil {
			return info, err
		}
	}
	info.Index = time.Since(t)
	uniques2, err := readIndexDefs(ctx, pool, "HistoryUniqueConstraints")
	if err != nil {
		return info, err
	}
	plain2, err := readIndexDefs(ctx, pool, "HistoryPlainIndexes")
	if err != nil {
		return info, err
	}
	info.Identical = slices.Equal(uniques, uniques2) && slices.Equal(plain, plain2)

	// A freshly loaded table would otherwise be vacuumed and checkpointed by
	// the server in the middle of the measurement.
	t = time.Now()
	for _, q := range []string{"HistoryVacuum", "Checkpoint"} {
		if _, err := pool.Exec(ctx, query(q)); err != nil {
			return info, err
		}
	}
	info.Vacuum = time.Since(t)
	err = pool.QueryRow(ctx, query("HistorySizes")).Scan(&info.Rows, &info.TableSize, &info.IndexSize)
	return info, err
}

// insertHistory inserts keys from..to of the series on a connection of its
// own, closed afterwards so its session settings do not outlive the load.
func insertHistory(ctx context.Context, pool *pgxpool.Pool, accountID string, from, to, total int64, body []byte) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	defer conn.Conn().Close(context.WithoutCancel(ctx))
	for _, q := range []string{"HistorySessionReplica", "HistorySessionAsync"} {
		if _, err := conn.Exec(ctx, query(q)); err != nil {
			return err
		}
	}
	_, err = conn.Exec(ctx, query("HistoryInsert"), accountID, from, to, total, body)
	return err
}
