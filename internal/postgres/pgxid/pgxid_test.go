package pgxid

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

func TestCrossed(t *testing.T) {
	for _, c := range []struct {
		from, to uint64
		want     string
	}{
		{999, 1000, "[10^3 (1000)]"},
		{1000, 1001, "[]"},
		{9_999_999_500, 10_000_000_100, "[10^10 (10000000000)]"},
		{3*EpochSize - 500, 3*EpochSize + 600, "[epoch 3 (12884901888)]"},
		{EpochSize - 1, EpochSize, "[epoch 1 (4294967296)]"},
		{700, 5 * EpochSize, "[10^3 (1000) 10^4 (10000) 10^5 (100000) 10^6 (1000000) 10^7 (10000000) 10^8 (100000000) 10^9 (1000000000) 10^10 (10000000000) epoch 1 (4294967296) epoch 2 (8589934592) epoch 3 (12884901888) epoch 4 (17179869184) epoch 5 (21474836480)]"},
	} {
		if got := fmt.Sprint(Crossed(c.from, c.to)); got != c.want {
			t.Errorf("Crossed(%d, %d) = %s, want %s", c.from, c.to, got, c.want)
		}
	}
}

// TestPick: every seed picks a boundary a fresh cluster (next xid near
// 750) can be moved 500 below, with a normal 32-bit xid there.
func TestPick(t *testing.T) {
	kinds := map[bool]int{}
	for seed := range uint64(64) {
		b := Pick(seed)
		start := b.Xid - 500
		if start < 100_000-500 || start%EpochSize < firstNormal {
			t.Errorf("seed %d: %v, start %d", seed, b, start)
		}
		if got := Crossed(start, b.Xid); len(got) == 0 || got[len(got)-1] != b {
			t.Errorf("seed %d: from %d to %v crosses %v", seed, start, b, got)
		}
		kinds[b.Xid%EpochSize == 0]++
	}
	if kinds[true] == 0 || kinds[false] == 0 {
		t.Errorf("the seeds pick epochs %d times, powers of ten %d times: want both", kinds[true], kinds[false])
	}
}

// TestCreateSegment: a missing segment is written whole and zeroed; one the
// server wrote only the first page of (initdb's 0000) keeps that page and
// gets the rest, which the server reads when the next xid lands there.
func TestCreateSegment(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "0FFF")
	if err := createSegment(dir, fresh); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(fresh); err != nil || len(b) != segmentBytes || bytes.Count(b, []byte{0}) != segmentBytes {
		t.Fatalf("new segment: %d bytes, err %v", len(b), err)
	}
	short := filepath.Join(dir, "0000")
	page := bytes.Repeat([]byte{0x55}, 8192) // committed statuses
	if err := os.WriteFile(short, page, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := createSegment(dir, short); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(short)
	if err != nil || len(b) != segmentBytes || !bytes.Equal(b[:8192], page) || bytes.Count(b[8192:], []byte{0}) != segmentBytes-8192 {
		t.Fatalf("extended segment: %d bytes, first page kept %v, err %v", len(b), bytes.Equal(b[:min(len(b), 8192)], page), err)
	}
}

// TestNextHop: from a fresh cluster to any boundary Pick chooses, no hop
// moves the 32-bit xid by more than 2^30, and at most four hops arrive.
func TestNextHop(t *testing.T) {
	for seed := range uint64(16) {
		next := Pick(seed).Xid - 500
		cur, hops := uint64(730), 0
		for cur != next {
			to := nextHop(cur, next)
			if d := (to - cur) % EpochSize; d > EpochSize/4 || to > next || to <= cur {
				t.Fatalf("seed %d: hop from %d to %d (32-bit distance %d) on the way to %d", seed, cur, to, d, next)
			}
			cur, hops = to, hops+1
		}
		if hops > 4 {
			t.Errorf("seed %d: %d hops to %d", seed, hops, next)
		}
	}
}
