package providersim

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// mpNotify records a Mercado Pago notification about a payment and queues
// it for the endpoint registered for the access token
// (RegisterWebhookEndpoint). Requires s.mu.
func (s *Server) mpNotify(a *account, p *mpPayment, action string, now time.Time) {
	s.mpNotifyTopic(a, p, mpTopicPayment, action, strconv.FormatInt(p.ID, 10), now)
}

// Notification topics: a payment's, and a chargeback's (data.id is then
// the chargeback's id).
const (
	mpTopicPayment     = "payment"
	mpTopicChargebacks = "topic_chargebacks_wh"
)

// mpNotifyTopic records and queues a notification of a topic about the
// object dataID, which concerns payment p. Requires s.mu.
func (s *Server) mpNotifyTopic(a *account, p *mpPayment, topic, action, dataID string, now time.Time) {
	s.mp.nextNote++
	body := map[string]any{"id": s.mp.nextNote, "live_mode": false, "type": topic, "date_created": mpTime(now),
		"user_id": mpUserID(a.key), "api_version": "v1", "action": action, "data": map[string]string{"id": dataID}}
	payload, err := json.Marshal(body)
	if err != nil {
		panic(err) // only our own types are marshalled
	}
	ev := &Event{ID: strconv.FormatInt(s.mp.nextNote, 10), Type: action, IntentID: strconv.FormatInt(p.ID, 10), IntentStatus: p.Status,
		Created: now, Payload: payload, mpDataID: dataID, mpTopic: topic}
	a.events = append(a.events, *ev)
	if ep, ok := s.hooks.endpoints[a.key]; ok {
		s.enqueue(outgoing{ev, ep})
	}
}

// mpUserID is the seller's user id: the last part of an access token
// (TEST-<app>-<date>-<hash>-<user id>) when numeric, else a made-up one.
func mpUserID(token string) int64 {
	parts := strings.Split(token, "-")
	if id, err := strconv.ParseInt(parts[len(parts)-1], 10, 64); err == nil {
		return id
	}
	return 123456789
}

// MPSignature is the x-signature header Mercado Pago sends with a
// notification: ts in Unix seconds and v1 the hex HMAC-SHA256, keyed with
// the webhook secret, of the manifest "id:<data.id>;request-id:<x-request-id>;ts:<ts>;".
func MPSignature(dataID, requestID, secret string, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte("id:" + strings.ToLower(dataID) + ";request-id:" + requestID + ";ts:" + ts + ";"))
	return "ts=" + ts + ",v1=" + hex.EncodeToString(mac.Sum(nil))
}

// mpDeliver POSTs one notification as Mercado Pago does: data.id and type
// in the query too, a fresh x-request-id and x-signature signed with the
// wall clock.
func (s *Server) mpDeliver(o outgoing) Delivery {
	now := time.Now()
	d := Delivery{EventID: o.ev.ID, Type: o.ev.Type, URL: o.ep.url, Time: now}
	sep := "?"
	if strings.Contains(o.ep.url, "?") {
		sep = "&"
	}
	req, err := http.NewRequest(http.MethodPost, o.ep.url+sep+"data.id="+o.ev.mpDataID+"&type="+o.ev.mpTopic, strings.NewReader(string(o.ev.Payload)))
	if err != nil {
		d.Error = err.Error()
		return d
	}
	requestID := newUUID()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "MercadoPago WebHook v1.0 "+o.ev.mpTopic)
	req.Header.Set("x-request-id", requestID)
	req.Header.Set("x-signature", MPSignature(o.ev.mpDataID, requestID, o.ep.secret, now))
	res, err := s.opts.WebhookClient.Do(req)
	if err != nil {
		d.Error = err.Error()
		return d
	}
	io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	res.Body.Close()
	d.Status = res.StatusCode
	return d
}

// newUUID is a random version 4 UUID, as Mercado Pago's x-request-id.
func newUUID() string {
	h := []byte(newID("", 32))
	const hexdigits = "0123456789abcdef"
	for i, b := range h {
		h[i] = hexdigits[int(b)%16]
	}
	h[12] = '4'
	return string(h[:8]) + "-" + string(h[8:12]) + "-" + string(h[12:16]) + "-" + string(h[16:20]) + "-" + string(h[20:])
}
