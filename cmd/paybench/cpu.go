package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, 100 on every Linux this runs on.
const clockTicks = 100

// cpuSnap is the CPU time consumed so far by the machine and by the
// processes a step involves.
type cpuSnap struct {
	at                 time.Time
	machineBusy, total uint64
	steal              uint64
	service, sim, gen  uint64
	postgres           uint64
}

// cpuUse is a step's CPU use in cores (1.0 = one core busy the whole step).
type cpuUse struct {
	Service, Postgres, Sim, Gen, Other, Idle float64
	// Steal is time the hypervisor gave this VM's CPUs to others, in
	// cores; it is part of Other.
	Steal float64
	Cores int
}

func (u cpuUse) String() string {
	if u.Cores == 0 {
		return "-"
	}
	return fmt.Sprintf("%3.0f/%3.0f/%3.0f/%3.0f/%3.0f", 100*u.Service, 100*u.Postgres, 100*u.Sim, 100*u.Gen, 100*u.Other)
}

// snapCPU reads /proc. gen are the load generator's processes (paybench
// itself, pgbench). The database is the server's own processes
// (checkpointer, WAL writer, autovacuum…) and the sessions on db; sessions on
// other databases are other people's work and count as "other".
func snapCPU(db string, servicePID, simPID int, gen ...int) cpuSnap {
	s := cpuSnap{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		for i, v := range f[1:] {
			n, _ := strconv.ParseUint(v, 10, 64)
			if i == 8 || i == 9 { // guest time is already in user
				continue
			}
			s.total += n
			if i != 3 && i != 4 { // idle, iowait
				s.machineBusy += n
			}
			if i == 7 {
				s.steal = n
			}
		}
	}
	s.service = procTicks(servicePID)
	s.sim = procTicks(simPID)
	s.gen = procTicks(os.Getpid())
	for _, p := range gen {
		s.gen += procTicks(p)
	}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		b, err := os.ReadFile(d + "/stat")
		if err != nil || !strings.Contains(string(b), "(postgres)") {
			continue
		}
		if cmd, err := os.ReadFile(d + "/cmdline"); err == nil && isOtherSession(string(cmd), db) {
			continue
		}
		s.postgres += ticksOf(string(b))
	}
	return s
}

// isOtherSession tells a client backend on another database from the
// server's own processes by its title: "postgres: 15/main: USER DB
// HOST(PORT) STATE" against "postgres: 15/main: checkpointer".
func isOtherSession(title, db string) bool {
	client := strings.Contains(title, "(") || strings.Contains(title, "[local]")
	return client && !strings.Contains(title, " "+db+" ")
}

func procTicks(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	return ticksOf(string(b))
}

// ticksOf returns utime+stime of a /proc/<pid>/stat line.
func ticksOf(stat string) uint64 {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseUint(f[11], 10, 64)
	k, _ := strconv.ParseUint(f[12], 10, 64)
	return u + k
}

// since is the CPU use between two snapshots, in cores.
func (s cpuSnap) since(before cpuSnap, cores int) cpuUse {
	secs := s.at.Sub(before.at).Seconds()
	if secs <= 0 {
		return cpuUse{}
	}
	c := func(a, b uint64) float64 {
		if a < b { // a process exited in between
			return 0
		}
		return float64(a-b) / clockTicks / secs
	}
	u := cpuUse{Cores: cores,
		Service: c(s.service, before.service), Postgres: c(s.postgres, before.postgres),
		Sim: c(s.sim, before.sim), Gen: c(s.gen, before.gen)}
	if s.total > before.total {
		frac := float64(s.machineBusy-before.machineBusy) / float64(s.total-before.total)
		busy := frac * float64(cores)
		u.Idle = float64(cores) - busy
		u.Other = max(0, busy-u.Service-u.Postgres-u.Sim-u.Gen)
		u.Steal = float64(s.steal-before.steal) / float64(s.total-before.total) * float64(cores)
	}
	return u
}
