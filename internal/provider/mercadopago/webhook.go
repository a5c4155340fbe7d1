package mercadopago

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acmepay/payments/internal/provider"
)

// SignatureTolerance is how far a notification's ts may be from now, either
// way: Stripe's default tolerance, so a captured delivery is replayable for
// no longer on one provider than on the other.
const SignatureTolerance = 5 * time.Minute

// msThreshold tells a ts in milliseconds from one in seconds: 1e12 s is
// the year 33658, 1e12 ms is 2001.
const msThreshold = 1_000_000_000_000

// Notification is what the service reads of a Mercado Pago notification's
// body: which object it is about, never its state.
type Notification struct {
	Type   string `json:"type"`
	Action string `json:"action"`
	Data   struct {
		ID json.RawMessage `json:"id"`
	} `json:"data"`
}

// DataID is data.id as text; Mercado Pago sends it as a string, older
// notifications as a number.
func (n Notification) DataID() string {
	var s string
	if json.Unmarshal(n.Data.ID, &s) == nil {
		return s
	}
	var num json.Number
	if json.Unmarshal(n.Data.ID, &num) == nil {
		return num.String()
	}
	return ""
}

// ParseNotification reads a notification's body.
func ParseNotification(body []byte) (Notification, error) {
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return n, fmt.Errorf("mercadopago: notification: %w", err)
	}
	return n, nil
}

// VerifySignature checks an x-signature header ("ts=…,v1=…") against the
// manifest "id:<data.id>;request-id:<x-request-id>;ts:<ts>;" keyed with the
// webhook secret, as Mercado Pago documents it: an alphanumeric data.id is
// signed in lower case and a part whose value is missing is left out. ts
// may be in seconds or milliseconds. Any failure is provider.ErrSignature.
func VerifySignature(signature, requestID, dataID, secret string, now time.Time) error {
	ts, v1 := signatureParts(signature)
	if ts == "" || v1 == "" || secret == "" || dataID == "" {
		return fmt.Errorf("%w: x-signature lacks ts or v1, or the notification names no object", provider.ErrSignature)
	}
	at, err := signedAt(ts)
	if err != nil {
		return err
	}
	if d := now.Sub(at); d > SignatureTolerance || d < -SignatureTolerance {
		return fmt.Errorf("%w: signed %s away from now", provider.ErrSignature, d.Round(time.Second))
	}
	got, err := hex.DecodeString(v1)
	if err != nil {
		return fmt.Errorf("%w: v1 is not hex", provider.ErrSignature)
	}
	if !hmac.Equal(got, Sign(Manifest(dataID, requestID, ts), secret)) {
		return fmt.Errorf("%w: no valid v1", provider.ErrSignature)
	}
	return nil
}

// Manifest is the text Mercado Pago signs.
func Manifest(dataID, requestID, ts string) string {
	var b strings.Builder
	if dataID != "" {
		b.WriteString("id:" + strings.ToLower(dataID) + ";")
	}
	if requestID != "" {
		b.WriteString("request-id:" + requestID + ";")
	}
	if ts != "" {
		b.WriteString("ts:" + ts + ";")
	}
	return b.String()
}

// Sign is the HMAC-SHA256 of a manifest keyed with the webhook secret.
func Sign(manifest, secret string) []byte {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(manifest))
	return mac.Sum(nil)
}

// signatureParts reads ts and v1 from an x-signature header.
func signatureParts(header string) (ts, v1 string) {
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "ts":
			ts = strings.TrimSpace(v)
		case "v1":
			v1 = strings.TrimSpace(v)
		}
	}
	return ts, v1
}

// signedAt reads ts, in seconds or in milliseconds.
func signedAt(ts string) (time.Time, error) {
	n, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, errors.Join(provider.ErrSignature, errors.New("ts is not a Unix time"))
	}
	if n >= msThreshold {
		return time.UnixMilli(n), nil
	}
	return time.Unix(n, 0), nil
}
