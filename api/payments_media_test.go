package api

import "testing"

// The bare type skips the parse; every other spelling is still parsed.
func TestIsJSON(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                true,
		"application/json; charset=utf-8": true,
		"Application/JSON":                true,
		"application/json;":               true,
		"":                                false,
		"text/plain":                      false,
		"application/jsonx":               false,
		"application/json; charset":       false,
		"application/problem+json":        false,
	} {
		if got := isJSON(ct); got != want {
			t.Errorf("isJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}
