package mercadopago

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/acmepay/payments/internal/provider/reach"
)

// sdkHost is the host sdk-go v1.8.0 writes into every URL.
const sdkHost = "api.mercadopago.com"

// callKey carries one call's settings from the adapter to the requester
// through the request's context: the SDK builds the request itself.
type callKey struct{}

// call is what the requester needs to know about one SDK call.
type call struct {
	// idemKey is the service's derived key, sent on every non-GET request.
	idemKey string
	// set are fields written into the JSON body as they are: "capture",
	// which sdk-go drops when false (omitempty) so that Mercado Pago would
	// capture at once, and "date_of_expiration" in the documented format.
	set map[string]any
	// wire is what the transport did for the call: every connection it
	// got is one send, and a call that got none never reached Mercado Pago.
	wire *reach.Call
}

// withCall carries the call in ctx and traces its transport. A second
// connection is net/http's silent re-send of a request on a broken reused
// keep-alive connection: the requester itself never retries.
func withCall(ctx context.Context, c *call) context.Context {
	ctx = context.WithValue(ctx, callKey{}, c)
	ctx, c.wire = reach.Trace(ctx)
	return ctx
}

func callFrom(ctx context.Context) *call {
	c, _ := ctx.Value(callKey{}).(*call)
	return c
}

// errNoKey: a mutating request without the service's key is never sent,
// or the SDK's random key would make every re-send a new payment.
var errNoKey = errors.New("mercadopago: mutating request without an idempotency key")

// requester replaces sdk-go's default one, which retries 5xx and transport
// errors three times on its own with a fresh random X-Idempotency-Key set
// by the SDK: here there are no retries, the key is the service's, and
// the base URL is MERCADOPAGO_API_BASE.
type requester struct {
	base   *url.URL
	client *http.Client
	// resend lets net/http re-send a mutating request on a broken reused
	// connection. Only while Mercado Pago keeps keys (a retention is set):
	// without one, a re-send is a new request that may charge again, so a
	// request without an answer stays in doubt for a lookup instead.
	resend bool
}

// Do sends one request once.
func (r *requester) Do(req *http.Request) (*http.Response, error) {
	out := req.Clone(req.Context())
	if out.URL.Host == sdkHost {
		out.URL.Scheme = r.base.Scheme
		out.URL.Host = r.base.Host
		out.URL.Path = strings.TrimSuffix(r.base.Path, "/") + out.URL.Path
		out.URL.RawPath = ""
		out.Host = ""
	}
	c := callFrom(req.Context())
	if req.Method == http.MethodGet {
		out.Header.Del("X-Idempotency-Key")
		return r.client.Do(out)
	}
	if c == nil || c.idemKey == "" {
		return nil, errNoKey
	}
	out.Header.Set("X-Idempotency-Key", c.idemKey)
	if len(c.set) > 0 {
		if err := setFields(out, c.set); err != nil {
			return nil, err
		}
	}
	if !r.resend {
		// net/http replays a request with a body only through GetBody.
		out.GetBody = nil
	}
	return r.client.Do(out)
}

// setFields writes fields into the request's JSON object body.
func setFields(req *http.Request, set map[string]any) error {
	fields := map[string]json.RawMessage{}
	if req.Body != nil {
		raw, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return fmt.Errorf("mercadopago: read request body: %w", err)
		}
		if len(bytes.TrimSpace(raw)) > 0 {
			if err := json.Unmarshal(raw, &fields); err != nil {
				return fmt.Errorf("mercadopago: request body is not a JSON object: %w", err)
			}
		}
	}
	for k, v := range set {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		fields[k] = raw
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	// GetBody lets net/http re-send the same bytes on a broken reused
	// connection, as it would have for the SDK's own request.
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
	return nil
}
