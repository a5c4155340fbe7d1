package provider

import (
	"testing"
	"time"
)

const (
	S = Succeeded
	D = Declined
	F = Failed
	U = Unknown
)

// sends are Judge's columns: a first send, a recovery inside the key's
// window and one past it, for an authorization and for another operation.
var sends = [6]Send{
	{Authorize: true, InWindow: true}, {Authorize: true, Recovery: true, InWindow: true}, {Authorize: true, Recovery: true},
	{InWindow: true}, {Recovery: true, InWindow: true}, {Recovery: true},
}

// judged is what one profile's answers prove, cell by cell.
type judged struct {
	profile Profile
	// want[answer] follows sends' order.
	want map[Answer][6]Outcome
}

func judgeTable() []judged {
	return []judged{
		{StripeProfile(StripeKeyRetention, DefaultSearchLag), map[Answer][6]Outcome{
			AnswerObject:        {S, S, S, S, S, S},
			AnswerCardError:     {D, D, D, F, F, F},
			AnswerInvalid:       {F, F, U, F, F, U},
			AnswerCredentials:   {F, U, U, F, U, U},
			AnswerIndeterminate: {U, U, U, U, U, U},
			AnswerUnreachable:   {F, U, U, F, U, U},
			AnswerNotFound:      {U, U, U, U, U, U},
		}},
		// A Stripe that kept no key would replay nothing.
		{StripeProfile(0, DefaultSearchLag), map[Answer][6]Outcome{
			AnswerObject:        {S, S, S, S, S, S},
			AnswerCardError:     {D, U, U, F, U, U},
			AnswerInvalid:       {F, U, U, F, U, U},
			AnswerCredentials:   {F, U, U, F, U, U},
			AnswerIndeterminate: {U, U, U, U, U, U},
			AnswerUnreachable:   {F, U, U, F, U, U},
			AnswerNotFound:      {U, U, U, U, U, U},
		}},
		// Mercado Pago's default: no retention, nothing is a replay.
		{MercadoPagoProfile(MercadoPagoKeyRetention, DefaultSearchLag), map[Answer][6]Outcome{
			AnswerObject:        {S, S, S, S, S, S},
			AnswerCardError:     {D, U, U, F, U, U},
			AnswerInvalid:       {F, U, U, F, U, U},
			AnswerCredentials:   {F, U, U, F, U, U},
			AnswerIndeterminate: {U, U, U, U, U, U},
			AnswerUnreachable:   {F, U, U, F, U, U},
			AnswerNotFound:      {U, U, U, U, U, U},
		}},
		// With a retention set, a refusal is replayed within the window;
		// an invalid request never counts as a replay.
		{MercadoPagoProfile(time.Hour, 10*time.Minute), map[Answer][6]Outcome{
			AnswerObject:        {S, S, S, S, S, S},
			AnswerCardError:     {D, D, U, F, F, U},
			AnswerInvalid:       {F, U, U, F, U, U},
			AnswerCredentials:   {F, U, U, F, U, U},
			AnswerIndeterminate: {U, U, U, U, U, U},
			AnswerUnreachable:   {F, U, U, F, U, U},
			AnswerNotFound:      {U, U, U, U, U, U},
		}},
	}
}

func TestJudge(t *testing.T) {
	t.Parallel()
	answers := []Answer{AnswerObject, AnswerCardError, AnswerInvalid, AnswerCredentials, AnswerIndeterminate,
		AnswerUnreachable, AnswerNotFound}
	for _, j := range judgeTable() {
		p := j.profile
		if len(j.want) != len(answers) {
			t.Errorf("%s (retention %s): %d answers in the table, want every one of %d", p.Name, p.KeyRetention, len(j.want), len(answers))
		}
		for _, a := range answers {
			for i, s := range sends {
				if got := Judge(p, a, s); got != j.want[a][i] {
					t.Errorf("%s (retention %s): Judge(%s, %+v) = %s, want %s", p.Name, p.KeyRetention, a, s, got, j.want[a][i])
				}
			}
		}
		// A lookup that finds nothing proves no effect from the profile's
		// search lag on.
		for _, c := range []struct {
			since time.Duration
			want  Outcome
		}{{0, U}, {p.SearchLag - time.Second, U}, {p.SearchLag, F}, {p.SearchLag + time.Hour, F}} {
			if got := Judge(p, AnswerNotFound, Send{Recovery: true, Since: c.since}); got != c.want {
				t.Errorf("%s: not found %s after the attempt = %s, want %s", p.Name, c.since, got, c.want)
			}
		}
		if got := Judge(p, "something new", Send{}); got != U {
			t.Errorf("%s: an unknown kind of answer = %s, want unknown", p.Name, got)
		}
	}
}

func TestProfiles(t *testing.T) {
	t.Parallel()
	s := StripeProfile(StripeKeyRetention, DefaultSearchLag)
	if s.Name != "stripe" || s.KeyRetention != 24*time.Hour || s.SearchLag != 5*time.Minute || !s.CredentialsFirst {
		t.Errorf("Stripe's profile = %+v", s)
	}
	m := MercadoPagoProfile(MercadoPagoKeyRetention, DefaultSearchLag)
	if m.Name != "mercadopago" || m.KeyRetention != 0 || m.SearchLag != 5*time.Minute || !m.CredentialsFirst {
		t.Errorf("Mercado Pago's profile = %+v", m)
	}
}
