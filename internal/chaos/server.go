package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/acmepay/payments/internal/postgres/pgxid"
)

// xidsBelow is how far below its xid8 boundary a run's private cluster
// starts: a short run uses thousands of transactions, so it crosses it
// early, while the feed is being read and written.
const xidsBelow = 500

// xidTally is where the server's transaction ids went during the run.
type xidTally struct {
	Start, End uint64
	// Planned is the boundary the private cluster was moved below (zero
	// when the run's server is not private).
	Planned pgxid.Boundary
	Crossed []pgxid.Boundary
	Skipped string // why the cluster was not moved
}

// CrossedPlanned reports whether the run crossed the boundary its cluster
// was moved below.
func (x xidTally) CrossedPlanned() bool {
	for _, b := range x.Crossed {
		if x.Planned.Name != "" && b == x.Planned {
			return true
		}
	}
	return false
}

func (x xidTally) String() string {
	crossed := make([]string, 0, len(x.Crossed))
	for _, b := range x.Crossed {
		crossed = append(crossed, b.String())
	}
	s := fmt.Sprintf("start %d end %d crossed %s", x.Start, x.End, strings.Join(crossed, ", "))
	if len(crossed) == 0 {
		s += "none"
	}
	switch {
	case x.Skipped != "":
		s += " (not moved: " + x.Skipped + ")"
	case !x.CrossedPlanned():
		s += fmt.Sprintf(" (moved %d below %s, not crossed)", xidsBelow, x.Planned)
	}
	return s
}

// setupServer gives the run its PostgreSQL server: by default a private
// cluster whose next xid8 is moved just below a power of ten or an epoch
// chosen by the seed; the server given (a failover formation), or with
// SharedPostgres the shared one, otherwise. pg is the private cluster, nil
// for the others; stop undoes what was started.
func setupServer(ctx context.Context, cfg Config, rep *Report, root, work, logDir string, say func(string, ...any)) (server string, pg *privatePostgres, stop func(), err error) {
	stop = func() {}
	switch {
	case cfg.Server != "":
		rep.PGSkipped = "the run's server is the one given (a failover formation); it is failed over instead"
		rep.Xid.Skipped = "the run's server is the one given (a failover formation)"
		return cfg.Server, nil, stop, nil
	case cfg.SharedPostgres:
		if server, err = serverURL(ctx, root); err != nil {
			return "", nil, stop, err
		}
		host := server
		if u, perr := url.Parse(server); perr == nil {
			host = u.Host
		}
		rep.PGSkipped = fmt.Sprintf("the run uses the PostgreSQL server at %s, which this program did not start and others share; without -shared-pg, -restart-pg restarts the run's private cluster", host)
		rep.Xid.Skipped = "-shared-pg: the server at " + host + " is not this program's to move"
		say("postgres restart skipped: %s", rep.PGSkipped)
		return server, nil, stop, nil
	}
	pgDir := filepath.Join(work, "pg")
	// The cluster's owner (postgres, when this runs as root) must reach it.
	if err := os.Chmod(work, 0o711); err != nil {
		return "", nil, stop, err
	}
	if err := os.MkdirAll(pgDir, 0o755); err != nil {
		return "", nil, stop, err
	}
	pgLog, err := os.Create(filepath.Join(logDir, "pg_ctl.log"))
	if err != nil {
		return "", nil, stop, err
	}
	private, err := startPrivatePostgres(ctx, pgDir, pgLog)
	if err != nil {
		pgLog.Close()
		return "", nil, stop, err
	}
	stop = func() { private.stop(); pgLog.Close() }
	b := pgxid.Pick(cfg.Seed)
	rep.Xid.Planned = b
	if err := private.moveXid(ctx, b.Xid-xidsBelow); err != nil {
		return "", nil, stop, err
	}
	say("private PostgreSQL on 127.0.0.1:%s, its next xid8 moved to %d, %d below %s", private.port, b.Xid-xidsBelow, xidsBelow, b)
	if cfg.RestartPostgres {
		say("it will be restarted once (immediate shutdown)")
	} else {
		rep.PGSkipped = "-restart-pg restarts the run's private cluster once"
	}
	return private.url(), private, stop, nil
}
