package pgxid

import (
	"fmt"
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
