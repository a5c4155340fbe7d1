package console

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// Cookie names. The session cookie is signed with a key derived from
// ADMIN_TOKEN, so every instance accepts it and rotating the token signs
// everyone out.
const (
	sessionCookie = "console_session"
	signInCookie  = "console_sign_in"
)

// session is who is signed in until when; Nonce makes its CSRF token.
type session struct {
	Actor   string `json:"a"`
	Expires int64  `json:"e"`
	Nonce   string `json:"n"`
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

func (k keys) encode(s session) string {
	b, _ := json.Marshal(s)
	payload := base64.RawURLEncoding.EncodeToString(b)
	return payload + "." + k.sign("session", payload)
}

func (k keys) decode(v string, now time.Time) (session, bool) {
	payload, sig, ok := strings.Cut(v, ".")
	if !ok || !hmac.Equal([]byte(sig), []byte(k.sign("session", payload))) {
		return session{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(payload)
	if err != nil {
		return session{}, false
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || s.Actor == "" || s.Nonce == "" || now.Unix() >= s.Expires {
		return session{}, false
	}
	return s, true
}

// csrf is the session's form token: every POST must carry it.
func (k keys) csrf(s session) string { return k.sign("csrf", s.Nonce) }

// signInCSRF ties the sign-in form to the browser that loaded it.
func (k keys) signInCSRF(nonce string) string { return k.sign("sign-in", nonce) }

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
