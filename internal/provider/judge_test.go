package provider

import "testing"

func TestJudge(t *testing.T) {
	t.Parallel()
	answers := []Answer{AnswerObject, AnswerCardError, AnswerInvalid, AnswerCredentials, AnswerIndeterminate}
	// want[answer] = {first send, recovery in window, recovery past window}
	// for an authorization; a card error elsewhere is a plain failure.
	want := map[Answer][3]Outcome{
		AnswerObject:        {Succeeded, Succeeded, Succeeded},
		AnswerCardError:     {Declined, Declined, Declined},
		AnswerInvalid:       {Failed, Failed, Unknown},
		AnswerCredentials:   {Failed, Unknown, Unknown},
		AnswerIndeterminate: {Unknown, Unknown, Unknown},
	}
	for _, a := range answers {
		sends := []Send{{Authorize: true, InWindow: true}, {Authorize: true, Recovery: true, InWindow: true}, {Authorize: true, Recovery: true}}
		for i, s := range sends {
			if got := Judge(a, s); got != want[a][i] {
				t.Errorf("Judge(%s, %+v) = %s, want %s", a, s, got, want[a][i])
			}
			s.Authorize = false
			w := want[a][i]
			if w == Declined {
				w = Failed
			}
			if got := Judge(a, s); got != w {
				t.Errorf("Judge(%s, %+v) = %s, want %s", a, s, got, w)
			}
		}
	}
	if got := Judge(AnswerNotFound, Send{Recovery: true}); got != Unknown {
		t.Errorf("not found within the grace = %s, want unknown", got)
	}
	if got := Judge(AnswerNotFound, Send{Recovery: true, PastGrace: true}); got != Failed {
		t.Errorf("not found past the grace = %s, want failed", got)
	}
	if got := Judge("something new", Send{}); got != Unknown {
		t.Errorf("an unknown kind of answer = %s, want unknown", got)
	}
}
