package payment

import (
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"golang.org/x/text/unicode/norm"
)

// strictOptions make every request body mean one thing to every parser:
// duplicate names, unknown names, names in another case, invalid UTF-8 and
// trailing data are all refused.
var strictOptions = json.JoinOptions(
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
	json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(false),
)

// DecodeStrict is the one decoder of request bodies. Beyond the JSON rules
// above, every name and string value is checked before anything is reserved
// or sent: no NUL, no null values (an omitted field is the only way to ask
// for a default), and no card number (see ContainsCardNumber). The fields
// listed in secrets are credentials and skip the card check only.
// Errors name the field and never echo more than a short, digit-masked
// excerpt of what the client sent.
func DecodeStrict(body []byte, v any, secrets ...string) error {
	if err := json.Unmarshal(body, v, strictOptions); err != nil {
		return describeStrictError(err)
	}
	return checkStrings(body, secrets)
}

// checkStrings walks an already valid body token by token. The field's
// name is built only when it is needed: for an error, or to tell a secret.
func checkStrings(body []byte, secrets []string) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	field := func() string { return fieldName(dec.StackPointer()) }
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return invalidBody("the body is not valid JSON")
		}
		switch tok.Kind() {
		case 'n':
			return fieldError(field(), "must not be null; omit the field to use its default")
		case '"':
			kind, n := dec.StackIndex(dec.StackDepth())
			isName := kind == '{' && n%2 == 1
			s := tok.String()
			what := "must not"
			if isName {
				what = "names must not"
			}
			if strings.IndexByte(s, 0) >= 0 {
				return fieldError(field(), what+" contain NUL characters")
			}
			// A secret may look like a card number; it is named only then.
			if ContainsCardNumber(s) && (isName || !contains(secrets, field())) {
				return fieldError(field(), what+" contain a card number; send a provider token, never card data")
			}
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// CheckText refuses a client string from outside a body (a query
// parameter) that is not text PostgreSQL can take: invalid UTF-8 or a NUL.
func CheckText(field, s string) error {
	switch {
	case !utf8.ValidString(s):
		return fieldError(Excerpt(field), "must be valid UTF-8")
	case strings.IndexByte(s, 0) >= 0:
		return fieldError(Excerpt(field), "must not contain NUL characters")
	}
	return nil
}

// ValidText reports whether s is text PostgreSQL can take.
func ValidText(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

func invalidBody(msg string) *Error {
	return &Error{Code: CodeInvalidRequest, Message: msg}
}

// fieldName turns a JSON pointer into the dotted field name of the errors
// list (metadata.k), each part masked as client text.
func fieldName(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, Excerpt(tok))
	}
	if len(parts) == 0 {
		return "body"
	}
	return strings.Join(parts, ".")
}

// describeStrictError explains a decoding error without quoting the input
// beyond a masked excerpt of a member name.
func describeStrictError(err error) error {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.As(err, &syn):
		field := fieldName(syn.JSONPointer)
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			return fieldError(field, "appears more than once")
		case strings.Contains(syn.Err.Error(), "UTF-8"), strings.Contains(syn.Err.Error(), "surrogate"):
			return fieldError(field, "must be valid UTF-8")
		case errors.Is(syn.Err, io.ErrUnexpectedEOF) && syn.ByteOffset == 0:
			return invalidBody("the body must be a JSON object")
		case strings.Contains(syn.Err.Error(), "after top-level value"):
			return invalidBody("the body must be a single JSON object")
		}
		return invalidBody("the body is not valid JSON")
	case errors.As(err, &sem):
		field := fieldName(sem.JSONPointer)
		switch {
		case errors.Is(sem.Err, json.ErrUnknownName):
			return fieldError(field, "is not a known field")
		case field == "body":
			return invalidBody("the body must be a JSON object")
		}
		return fieldError(field, "has the wrong type")
	}
	return invalidBody("the body is not a valid request")
}

// Excerpt is how client text appears in an error: at most 32 characters,
// digits of every script masked (so no card number can be echoed), anything unprintable
// replaced.
func Excerpt(s string) string {
	const max = 32
	var b strings.Builder
	n := 0
	for _, r := range norm.NFKC.String(s) {
		if n == max {
			b.WriteString("…")
			break
		}
		switch {
		case isDigitOfAnyScript(r):
			b.WriteByte('#')
		case r == utf8.RuneError || !unicode.IsPrint(r):
			b.WriteByte('?')
		default:
			b.WriteRune(r)
		}
		n++
	}
	return b.String()
}

// ParseAmount is the one number grammar of amounts on every endpoint: a
// JSON number whose exact value is an integer from 1 to MaxAmount (2000,
// 2e3 and 2000.0 are the same amount; 1999.9999999999999999 is not). It is
// exact: no rounding through floating point, and no huge exponent expanded.
func ParseAmount(raw jsontext.Value) (int64, bool) {
	if raw.Kind() != '0' {
		return 0, false
	}
	n := string(raw)
	if strings.HasPrefix(n, "-") {
		return 0, false
	}
	mant, exp := n, 0
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		mant = n[:i]
		e := strings.TrimPrefix(n[i+1:], "+")
		if len(strings.TrimLeft(strings.TrimPrefix(e, "-"), "0")) > 4 {
			return 0, false // |exponent| ≥ 10000: never an amount
		}
		v, err := strconv.Atoi(e)
		if err != nil {
			return 0, false
		}
		exp = v
	}
	digits := mant
	if i := strings.IndexByte(mant, '.'); i >= 0 {
		digits = mant[:i] + mant[i+1:]
		exp -= len(mant) - i - 1
	}
	digits = strings.TrimLeft(digits, "0")
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		exp++
	}
	if digits == "" || exp < 0 || len(digits)+exp > len(strconv.Itoa(MaxAmount)) {
		return 0, false
	}
	v, err := strconv.ParseInt(digits+strings.Repeat("0", exp), 10, 64)
	if err != nil || v < 1 || v > MaxAmount {
		return 0, false
	}
	return v, true
}
