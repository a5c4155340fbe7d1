// Package pgxid moves the next transaction id (xid8) of a private,
// throwaway PostgreSQL cluster to just below a boundary that a fresh
// cluster reaches only after months or years of traffic: a power of ten,
// where the decimal form of an xid8 gets one digit longer (the events
// feed's cursor carries it as text), or an epoch, where the 32-bit xid
// wraps and the epoch in the upper half goes up by one.
//
// Never use it on a cluster that holds data of value: pg_resetwal rewrites
// the control file.
package pgxid

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/acmepay/payments/internal/postgres/internal/dbsqlc"
	"github.com/jackc/pgx/v5"
)

const (
	// EpochSize is how many xid8 values one epoch spans: the 32-bit xid.
	EpochSize = uint64(1) << 32
	// firstNormal is the first 32-bit xid a transaction gets: 0, 1 and 2
	// are reserved and skipped when the counter wraps.
	firstNormal = 3
	// xactsPerSegment: a pg_xact page (8 kB) holds 4 statuses a byte,
	// and a segment file 32 pages.
	xactsPerSegment = 8192 * 4 * 32
	segmentBytes    = 8192 * 32
	// maxHop is the most MoveTo moves the 32-bit xid at once.
	maxHop = EpochSize / 4
)

// Boundary is an xid8 value a cluster's next transaction id may cross.
type Boundary struct {
	Xid  uint64
	Name string // "10^10" or "epoch 3"
}

func (b Boundary) String() string { return b.Name + " (" + strconv.FormatUint(b.Xid, 10) + ")" }

// PowerOfTen is the boundary 10^n.
func PowerOfTen(n int) Boundary {
	x := uint64(1)
	for range n {
		x *= 10
	}
	return Boundary{Xid: x, Name: "10^" + strconv.Itoa(n)}
}

// Epoch is the boundary where epoch e begins.
func Epoch(e uint64) Boundary {
	return Boundary{Xid: e * EpochSize, Name: "epoch " + strconv.FormatUint(e, 10)}
}

// Pick chooses a boundary from seed: a power of ten from 10^5 to 10^12 or
// the start of an epoch from 1 to 8.
func Pick(seed uint64) Boundary {
	if seed%2 == 0 {
		return PowerOfTen(5 + int(seed/2%8))
	}
	return Epoch(1 + seed/2%8)
}

// Crossed lists the powers of ten and epoch starts in (from, to]: those an
// xid8 counter that went from from to to has passed.
func Crossed(from, to uint64) []Boundary {
	var out []Boundary
	for n := 1; n <= 19; n++ {
		if b := PowerOfTen(n); from < b.Xid && b.Xid <= to {
			out = append(out, b)
		}
	}
	for e := from/EpochSize + 1; e <= to/EpochSize; e++ {
		out = append(out, Epoch(e))
	}
	return out
}

// Freeze runs VACUUM FREEZE in every database of the server at serverURL,
// template0 included. A tuple whose xmin is not frozen would change
// meaning when the 32-bit xid counter jumps, and so would a table's
// relfrozenxid: run it before Move, and again after the server has started
// on the new xid, before anything else writes.
func Freeze(ctx context.Context, serverURL string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	defer conn.Close(ctx)
	names, err := dbsqlc.New(conn).ServerDatabasesConnectable(ctx)
	if err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	// The connectable databases first: the first of them also freezes the
	// shared catalogs, pg_database among them, so that the row the ALTER
	// below writes is not older than pg_database's relfrozenxid, which
	// right after a Move may lie in the 32-bit future.
	for _, name := range names {
		if err := freezeDatabase(ctx, serverURL, name); err != nil {
			return err
		}
	}
	// ALTER DATABASE and VACUUM are utility statements, no queries for
	// sqlc: they stay here, with the pg_resetwal tooling they serve.
	if _, err := conn.Exec(ctx, `ALTER DATABASE template0 ALLOW_CONNECTIONS true`); err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	if err := freezeDatabase(ctx, serverURL, "template0"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, `ALTER DATABASE template0 ALLOW_CONNECTIONS false`); err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	// The ALTERs wrote new pg_database rows: freeze that shared catalog once more.
	if _, err := conn.Exec(ctx, `VACUUM FREEZE pg_database`); err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	return nil
}

func freezeDatabase(ctx context.Context, serverURL, name string) error {
	u, err := url.Parse(serverURL)
	if err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	u.Path = "/" + name
	conn, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return fmt.Errorf("pgxid: connect to %s: %w", name, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "VACUUM FREEZE"); err != nil {
		return fmt.Errorf("pgxid: vacuum freeze %s: %w", name, err)
	}
	return nil
}

// Cluster is a private cluster as MoveTo handles it.
type Cluster struct {
	URL        string // of a database on it
	DataDir    string
	PgResetwal string
	// Stop stops it cleanly (pg_resetwal refuses an unclean data
	// directory); Start starts it again.
	Stop, Start func() error
	// Run runs a program as the cluster's owner.
	Run func(bin string, args ...string) error
}

// MoveTo moves the cluster's next transaction id (xid8) forward to next,
// cutting every session. Tuples and relfrozenxid carry 32-bit xids, which
// compare modulo 2^32: a jump of 2^31 or more would put them in the
// future, and one close to that would make the frozen horizons old enough
// for the server to refuse writes (its wraparound stop limit). So it goes
// in hops of at most 2^30 of the 32-bit xid (the epoch jumps for free),
// each a Freeze, a stop, a Move and a start, and freezes once more on
// arrival.
func (c Cluster) MoveTo(ctx context.Context, next uint64) error {
	for {
		cur, err := Current(ctx, c.URL)
		if err != nil {
			return err
		}
		if next < cur {
			return fmt.Errorf("pgxid: the cluster is at xid8 %d, past %d", cur, next)
		}
		if err := Freeze(ctx, c.URL); err != nil {
			return err
		}
		if next == cur {
			return nil
		}
		to := nextHop(cur, next)
		if err := c.Stop(); err != nil {
			return fmt.Errorf("pgxid: stop: %w", err)
		}
		if err := Move(c.DataDir, c.PgResetwal, to, c.Run); err != nil {
			return err
		}
		if err := c.Start(); err != nil {
			return fmt.Errorf("pgxid: start: %w", err)
		}
	}
}

// nextHop is where MoveTo moves from cur on its way to next.
func nextHop(cur, next uint64) uint64 {
	if (next-cur)%EpochSize > maxHop {
		return cur + maxHop
	}
	return next
}

// Move sets the next transaction id of the cleanly stopped cluster in
// dataDir to next with pg_resetwal -e/-x, run through run (as the
// cluster's owner); MoveTo is the safe way to call it. pg_resetwal does
// not create the pg_xact segment that holds next's status, which the
// server reads at start: Move writes it, or the missing rest of it, zeroed
// (no transaction there has a status yet), owned like its directory.
func Move(dataDir, pgResetwal string, next uint64, run func(bin string, args ...string) error) error {
	epoch, xid := next/EpochSize, next%EpochSize
	if xid < firstNormal {
		return fmt.Errorf("pgxid: xid8 %d: the low 32 bits must be at least %d", next, firstNormal)
	}
	dir := filepath.Join(dataDir, "pg_xact")
	seg := filepath.Join(dir, fmt.Sprintf("%04X", xid/xactsPerSegment))
	if err := createSegment(dir, seg); err != nil {
		return err
	}
	if err := run(pgResetwal, "-e", strconv.FormatUint(epoch, 10), "-x", strconv.FormatUint(xid, 10), "-D", dataDir); err != nil {
		return fmt.Errorf("pgxid: pg_resetwal: %w", err)
	}
	return nil
}

// createSegment makes seg a whole segment: a new one zeroed, or one the
// server has written only the first pages of (its pages are added as
// they are reached) extended with zeroed pages.
func createSegment(dir, seg string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	st, err := f.Stat()
	if err == nil && st.Size() < segmentBytes {
		err = f.Truncate(segmentBytes)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("pgxid: %w", err)
	}
	if owner, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 {
		if err := os.Chown(seg, int(owner.Uid), int(owner.Gid)); err != nil {
			return fmt.Errorf("pgxid: %w", err)
		}
	}
	return nil
}

// Current is the server's next xid8 as a transaction would get it now.
func Current(ctx context.Context, serverURL string) (uint64, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return 0, fmt.Errorf("pgxid: %w", err)
	}
	defer conn.Close(ctx)
	s, err := dbsqlc.New(conn).ServerNextXid(ctx)
	if err != nil {
		return 0, fmt.Errorf("pgxid: %w", err)
	}
	return strconv.ParseUint(s, 10, 64)
}
