package providersim

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	qrcode "github.com/skip2/go-qrcode"
)

// hostedRoutes mounts the pages a customer's browser visits: the 3-D Secure
// challenge, the Pix instructions with the QR code and the Boleto voucher.
func (s *Server) hostedRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /_sim/3ds/{id}", s.hosted("card", func(w http.ResponseWriter, r *http.Request, v hostedView) {
		render(w, challengePage, v)
	}))
	m.HandleFunc("POST /_sim/3ds/{id}", s.hosted("card", s.completeChallenge))
	m.HandleFunc("GET /_sim/pix/{id}", s.hosted("pix", func(w http.ResponseWriter, r *http.Request, v hostedView) {
		render(w, pixPage, v)
	}))
	m.HandleFunc("GET /_sim/pix/{id}/qr.png", s.hosted("pix", func(w http.ResponseWriter, r *http.Request, v hostedView) {
		png, err := qrcode.Encode(v.PixData, qrcode.Medium, 256)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	}))
	m.HandleFunc("GET /_sim/pix/{id}/qr.svg", s.hosted("pix", func(w http.ResponseWriter, r *http.Request, v hostedView) {
		svg, err := qrSVG(v.PixData)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "image/svg+xml")
		w.Write(svg)
	}))
	m.HandleFunc("GET /_sim/boleto/{id}", s.hosted("boleto", func(w http.ResponseWriter, r *http.Request, v hostedView) {
		render(w, boletoPage, v)
	}))
	m.HandleFunc("GET /_sim/boleto/{id}/voucher.pdf", s.hosted("boleto", func(w http.ResponseWriter, r *http.Request, v hostedView) {
		w.Header().Set("Content-Type", "application/pdf")
		w.Write(voucherPDF(v))
	}))
}

// hostedView is what a hosted page shows of an intent.
type hostedView struct {
	ID, Status, Amount, PixData, BoletoNumber, Name string
	ClientSecret, ReturnURL                         string
	ExpiresAt                                       string
	Waiting                                         bool // the customer can still act
}

// hosted resolves the page's intent (of any secret key) of the given
// payment method type, after expiring what is due.
func (s *Server) hosted(methodType string, h func(http.ResponseWriter, *http.Request, hostedView)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		v, ok := s.view(r.PathValue("id"))
		if !ok || v.methodType != methodType {
			http.Error(w, "no such "+methodType+" payment", http.StatusNotFound)
			return
		}
		h(w, r, v.hostedView)
	}
}

type viewWithType struct {
	hostedView
	methodType string
}

func (s *Server) view(id string) (viewWithType, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a, pi := s.findIntent(id)
	if pi == nil {
		return viewWithType{}, false
	}
	s.expireDue(a, s.now())
	v := hostedView{ID: pi.ID, Status: pi.Status, Amount: formatAmount(pi.Amount, pi.Currency),
		PixData: pi.pixData, BoletoNumber: pi.boletoNumber, Name: pi.billingName,
		ClientSecret: pi.clientSecret, ReturnURL: pi.returnURL, Waiting: pi.Status == "requires_action"}
	if pi.ExpiresAt != nil {
		v.ExpiresAt = pi.ExpiresAt.In(saoPaulo).Format("2006-01-02 15:04:05 -07:00")
	}
	return viewWithType{v, pi.MethodType}, true
}

// completeChallenge handles the challenge page's Approve and Fail buttons,
// then sends the customer back to return_url as Stripe does, with
// redirect_status telling how the intent now stands (a second click finds
// it settled and reports that).
func (s *Server) completeChallenge(w http.ResponseWriter, r *http.Request, v hostedView) {
	var err error
	switch r.PostFormValue("action") {
	case "approve":
		_, err = s.Pay(v.ID)
	case "fail":
		_, err = s.Fail(v.ID)
	default:
		http.Error(w, "action: want approve or fail", http.StatusBadRequest)
		return
	}
	_ = err // a settled intent: the redirect reports its status
	after, _ := s.view(v.ID)
	status := "failed"
	if after.Status == "succeeded" || after.Status == "requires_capture" || after.Status == "processing" {
		status = "succeeded"
	}
	if v.ReturnURL == "" {
		render(w, challengeDonePage, struct{ ID, Status string }{v.ID, status})
		return
	}
	u, perr := url.Parse(v.ReturnURL)
	if perr != nil {
		http.Error(w, "bad return_url", http.StatusBadRequest)
		return
	}
	q := u.Query()
	q.Set("payment_intent", v.ID)
	q.Set("payment_intent_client_secret", v.ClientSecret)
	q.Set("redirect_status", status)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func formatAmount(amount int64, currency string) string {
	return fmt.Sprintf("%s %d.%02d", strings.ToUpper(currency), amount/100, amount%100)
}

func render(w http.ResponseWriter, t *template.Template, v any) {
	var b bytes.Buffer
	if err := t.Execute(&b, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

const pageHead = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{{template "title" .}} · providersim</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem}button{font-size:1rem;padding:.5rem 1rem;margin-right:.5rem}code{word-break:break-all}</style></head><body>`

var challengePage = template.Must(template.New("3ds").Parse(`{{define "title"}}3-D Secure{{end}}` + pageHead + `
<h1>3-D Secure test challenge</h1>
<p>Payment <code>{{.ID}}</code> of <strong>{{.Amount}}</strong>.</p>
{{if .Waiting}}
<form method="post"><input type="hidden" name="action" value="approve"><button id="approve" type="submit">Approve</button></form>
<form method="post"><input type="hidden" name="action" value="fail"><button id="fail" type="submit">Fail</button></form>
{{else}}<p id="status">This challenge is over: the payment is {{.Status}}.</p>{{end}}
</body></html>`))

var challengeDonePage = template.Must(template.New("3ds-done").Parse(`{{define "title"}}3-D Secure{{end}}` + pageHead + `
<p id="status">Authentication {{.Status}} for <code>{{.ID}}</code>. You may close this window.</p></body></html>`))

var pixPage = template.Must(template.New("pix").Parse(`{{define "title"}}Pix{{end}}` + pageHead + `
<h1>Pay {{.Amount}} with Pix</h1>
{{if .Waiting}}
<p><img id="qr" src="/_sim/pix/{{.ID}}/qr.png" alt="Pix QR code" width="256" height="256"></p>
<p>Or copy the code: <code id="data">{{.PixData}}</code></p>
<p>Expires at {{.ExpiresAt}}.</p>
{{else}}<p id="status">This Pix can no longer be paid: the payment is {{.Status}}.</p>{{end}}
</body></html>`))

var boletoPage = template.Must(template.New("boleto").Parse(`{{define "title"}}Boleto{{end}}` + pageHead + `
<h1>Boleto of {{.Amount}}</h1>
<p>Payer: {{.Name}}</p>
<p>Number: <code id="number">{{.BoletoNumber}}</code></p>
<p>Due: {{.ExpiresAt}}. {{if not .Waiting}}<span id="status">The payment is {{.Status}}.</span>{{end}}</p>
<p><a href="/_sim/boleto/{{.ID}}/voucher.pdf">Voucher (PDF)</a></p>
</body></html>`))

// qrSVG draws the QR code of data as SVG squares, one per dark module.
func qrSVG(data string) ([]byte, error) {
	q, err := qrcode.New(data, qrcode.Medium)
	if err != nil {
		return nil, err
	}
	bm := q.Bitmap() // includes the quiet zone
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" shape-rendering="crispEdges"><rect width="100%%" height="100%%" fill="#fff"/><path fill="#000" d="`, len(bm), len(bm))
	for y, row := range bm {
		for x, dark := range row {
			if dark {
				fmt.Fprintf(&b, "M%d %dh1v1h-1z", x, y)
			}
		}
	}
	b.WriteString(`"/></svg>`)
	return b.Bytes(), nil
}

// voucherPDF is a one-page PDF with the voucher's text.
func voucherPDF(v hostedView) []byte {
	lines := []string{"Boleto (providersim test voucher)", "Payment " + v.ID, "Amount " + v.Amount,
		"Payer " + v.Name, "Due " + v.ExpiresAt, v.BoletoNumber}
	var text strings.Builder
	text.WriteString("BT /F1 12 Tf 50 780 Td 16 TL\n")
	for _, l := range lines {
		text.WriteString("(" + pdfEscape(l) + ") Tj T*\n")
	}
	text.WriteString("ET")
	objs := []string{
		"<< /Type /Catalog /Pages 2 0 R >>",
		"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
		"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Contents 4 0 R /Resources << /Font << /F1 5 0 R >> >> >>",
		"<< /Length " + strconv.Itoa(text.Len()) + " >>\nstream\n" + text.String() + "\nendstream",
		"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
	}
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n")
	offsets := make([]int, len(objs))
	for i, o := range objs {
		offsets[i] = b.Len()
		fmt.Fprintf(&b, "%d 0 obj\n%s\nendobj\n", i+1, o)
	}
	xref := b.Len()
	fmt.Fprintf(&b, "xref\n0 %d\n0000000000 65535 f \n", len(objs)+1)
	for _, off := range offsets {
		fmt.Fprintf(&b, "%010d 00000 n \n", off)
	}
	fmt.Fprintf(&b, "trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n", len(objs)+1, xref)
	return b.Bytes()
}

func pdfEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, "(", `\(`, ")", `\)`).Replace(s)
}
