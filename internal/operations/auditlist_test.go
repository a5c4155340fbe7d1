package operations

import (
	"testing"
	"time"
)

// Slices are whole hours from the window's start; the hour before it is
// slice -1, so a payment made just before the window is still listed.
func TestSliceOf(t *testing.T) {
	t.Parallel()
	origin := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ls := newListings(origin)
	for _, tc := range []struct {
		at   time.Duration
		want int
	}{
		{0, 0}, {time.Hour - time.Nanosecond, 0}, {time.Hour, 1}, {72 * time.Hour, 72},
		{-time.Nanosecond, -1}, {-time.Hour, -1}, {-time.Hour - time.Nanosecond, -2},
	} {
		if got := ls.sliceOf(origin.Add(tc.at)); got != tc.want {
			t.Errorf("sliceOf(origin%+v) = %d, want %d", tc.at, got, tc.want)
		}
	}
}
