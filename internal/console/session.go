package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Cookie names. The session cookie holds a random id of a session stored
// on the server (only its hash); the console's signing key, derived from
// ADMIN_TOKEN, signs the CSRF tokens, so every instance accepts them and
// rotating the token invalidates every form.
const (
	sessionCookie = "console_session"
	signInCookie  = "console_sign_in"
)

// signInFormTTL is how long a sign-in form is good for (one sign-in).
const signInFormTTL = 10 * time.Minute

// session is who is signed in; Nonce is the session's id, the cookie's
// value, and makes its CSRF token.
type session struct {
	Actor string
	Nonce string
}

// keys derives the console's signing key from the admin token, so no other
// secret needs configuring and nothing signed here is valid as the token.
type keys struct {
	token []byte
	mac   []byte
}

func newKeys(adminToken string) keys {
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte("payments console session v1"))
	return keys{token: []byte(adminToken), mac: m.Sum(nil)}
}

func (k keys) sign(parts ...string) string {
	m := hmac.New(sha256.New, k.mac)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// tokenMatches compares in constant time; the lengths of the two may leak,
// as with any HMAC-free compare, but not where they differ.
func (k keys) tokenMatches(given string) bool {
	return subtle.ConstantTimeCompare([]byte(given), k.token) == 1
}

// idHash is what the server stores of a session id or a form nonce.
func idHash(id string) []byte {
	h := sha256.Sum256([]byte(id))
	return h[:]
}

// csrf is the session's form token: every POST must carry it.
func (k keys) csrf(s session) string { return k.sign("csrf", s.Nonce) }

// signInCSRF ties the sign-in form to the browser that loaded it (its
// nonce cookie) and to the time it was issued.
func (k keys) signInCSRF(nonce string, issued time.Time) string {
	at := strconv.FormatInt(issued.Unix(), 10)
	return at + "." + k.sign("sign-in", nonce, at)
}

// signInIssued checks a sign-in form's token against its nonce and returns
// when it was issued; false when it is not one this console signed for
// that nonce or it is older than signInFormTTL.
func (k keys) signInIssued(token, nonce string, now time.Time) (time.Time, bool) {
	at, sig, ok := strings.Cut(token, ".")
	if !ok || nonce == "" || !hmac.Equal([]byte(sig), []byte(k.sign("sign-in", nonce, at))) {
		return time.Time{}, false
	}
	unix, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	issued := time.Unix(unix, 0)
	if age := now.Sub(issued); age < -time.Minute || age >= signInFormTTL {
		return time.Time{}, false
	}
	return issued, true
}

func randomToken() string {
	b := make([]byte, 18)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func cookie(r *http.Request, name, value string, maxAge time.Duration) *http.Cookie {
	c := &http.Cookie{Name: name, Value: value, Path: "/console/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: overTLS(r), MaxAge: int(maxAge.Seconds())}
	if maxAge < 0 {
		c.MaxAge = -1
	}
	return c
}

// overTLS: the request came over TLS, here or (X-Forwarded-Proto) at a
// proxy in front.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func constantEq(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
