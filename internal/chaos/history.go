package chaos

import (
	"encoding/json"
	"strings"
	"sync"
	"time"
)

// call is one request of the fleet as its client saw it: the answer, or
// the error that stood for it (a client timeout, a transport error, the end
// of the run). The checkers read these, never the tallies.
type call struct {
	Key       string // Idempotency-Key; "" for a read
	Op        string // create, capture, cancel, refund, get
	Order     string
	PaymentID string // from the path, or from the answer of a create
	Call      time.Time
	Return    time.Time
	Status    int // 0: no answer
	Body      []byte
	Replayed  bool
	Lost      bool // the answer never came (timeout, transport error)
}

// received is one webhook delivery the merchant's endpoint accepted.
type received struct {
	ID     string
	At     time.Time
	Cursor string
}

// history is everything the clients, the feed consumer and the merchant's
// endpoint saw. Appending under one mutex is cheap next to an HTTP call.
type history struct {
	mu    sync.Mutex
	calls []call
	hooks []received
}

// opOf names the operation of a request by its method and path.
func opOf(method, path string) (op, paymentID string) {
	if method == "GET" {
		if id, ok := strings.CutPrefix(path, "/v1/payments/"); ok && !strings.Contains(id, "/") {
			return "get", id
		}
		return "", ""
	}
	if path == "/v1/payments" {
		return "create", ""
	}
	rest, ok := strings.CutPrefix(path, "/v1/payments/")
	if !ok {
		return "", ""
	}
	id, tail, _ := strings.Cut(rest, "/")
	switch tail {
	case "capture", "cancel":
		return tail, id
	case "refunds":
		return "refund", id
	}
	return "", ""
}

// record notes one exchange of the fleet; reads of other resources are
// left out.
func (h *history) record(method, path, key string, reqBody []byte, sent time.Time, a answer) {
	if h == nil {
		return
	}
	op, pid := opOf(method, path)
	if op == "" {
		return
	}
	c := call{Key: key, Op: op, PaymentID: pid, Call: sent, Return: time.Now(),
		Status: a.status, Body: a.body, Replayed: a.replayed, Lost: a.err != nil}
	if op == "create" {
		var b struct {
			OrderID string `json:"order_id"`
		}
		_ = json.Unmarshal(reqBody, &b)
		c.Order = b.OrderID
		if p := decodePayment(a.body); p != nil {
			c.PaymentID = p.ID
		}
	} else if key != "" {
		c.Order = orderOfKey(key, op)
	}
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
}

// orderOfKey reads the order out of a fleet's key: ck-{order}-{op}[-n].
func orderOfKey(key, op string) string {
	s := strings.TrimPrefix(key, "ck-")
	if i := strings.LastIndex(s, "-"+op); i > 0 {
		return s[:i]
	}
	return ""
}

// hook notes a delivery the merchant's endpoint accepted.
func (h *history) hook(id string, body []byte) {
	if h == nil {
		return
	}
	var b struct {
		Cursor string `json:"cursor"`
	}
	_ = json.Unmarshal(body, &b)
	h.mu.Lock()
	h.hooks = append(h.hooks, received{ID: id, At: time.Now(), Cursor: b.Cursor})
	h.mu.Unlock()
}

// snapshot copies what was recorded.
func (h *history) snapshot() ([]call, []received) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]call(nil), h.calls...), append([]received(nil), h.hooks...)
}
