package payment

import (
	"encoding/base64"
	"strings"
)

// cursorVersion heads every paging token; a new encoding takes a new
// version, and tokens of another version are refused like any foreign one.
const cursorVersion = "1"

// maxCursorLen bounds a token: the service's own are far shorter.
const maxCursorLen = 256

// Cursor is the one codec of the paging tokens lists hand out (the stuck
// list's after, the discrepancies' and the admin endpoints' cursor, and
// the console's pages). A token is base64url of "version.kind.payload":
// opaque to clients, tied to its list, and decoded strictly. A token the
// service did not issue (foreign, of another list or version, not
// canonical, or whose value is out of the list's range) is 400
// invalid_request naming the parameter: it never reaches a query.
type Cursor[T any] struct {
	// Kind tells the lists' tokens apart.
	Kind string
	// Field is the query parameter named in errors.
	Field string
	// Format writes a position as the payload; Parse reads it back and
	// refuses a value the service could not have issued.
	Format func(T) string
	Parse  func(string) (T, bool)
}

// Encode makes the token of a position.
func (c Cursor[T]) Encode(v T) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + "." + c.Kind + "." + c.Format(v)))
}

// Decode reads a token made by Encode; "" is the zero position (the
// list's start).
func (c Cursor[T]) Decode(token string) (T, error) {
	var zero T
	if token == "" {
		return zero, nil
	}
	bad := fieldError(c.Field, "must be a next_cursor this list returned")
	if len(token) > maxCursorLen {
		return zero, bad
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(token)
	if err != nil || !ValidText(string(raw)) {
		return zero, bad
	}
	payload, ok := strings.CutPrefix(string(raw), cursorVersion+"."+c.Kind+".")
	if !ok {
		return zero, bad
	}
	v, ok := c.Parse(payload)
	if !ok || c.Encode(v) != token {
		return zero, bad
	}
	return v, nil
}

// IDCursor pages a list by the service's own ids.
func IDCursor(kind, field string) Cursor[string] {
	return Cursor[string]{Kind: kind, Field: field,
		Format: func(id string) string { return id },
		Parse:  func(s string) (string, bool) { return s, ValidID(s) },
	}
}

// ValidID accepts the service's own ids (prefix_ then hex).
func ValidID(id string) bool {
	prefix, rest, ok := strings.Cut(id, "_")
	if !ok || prefix == "" || len(rest) != 32 {
		return false
	}
	for _, r := range prefix + rest {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}
