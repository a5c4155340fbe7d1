package payment

import (
	"testing"

	"github.com/acmepay/payments/internal/provider"
)

// Past its re-send window a capture or cancel is decided by the intent's
// state (CONTRACT §6): a cancel whose intent is still open never took
// effect, whatever the open state.
func TestInferFromIntentPastTheWindow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		op    Operation
		state provider.IntentState
		want  provider.Outcome
	}{
		{OpCancel, provider.IntentCanceled, provider.Succeeded},
		{OpCancel, provider.IntentRequiresAction, provider.Failed},
		{OpCancel, provider.IntentNeedsPaymentMethod, provider.Failed},
		{OpCancel, provider.IntentRequiresConfirmation, provider.Failed},
		{OpCancel, provider.IntentProcessing, provider.Failed},
		{OpCancel, provider.IntentAuthorized, provider.Failed},
		{OpCancel, provider.IntentCaptured, provider.Failed},
		{OpCancel, provider.IntentOther, provider.Unknown},
		{OpCapture, provider.IntentCaptured, provider.Succeeded},
		{OpCapture, provider.IntentAuthorized, provider.Failed},
		{OpCapture, provider.IntentRequiresAction, provider.Unknown},
	} {
		out := inferFromIntent(tc.op, &provider.Intent{State: tc.state})
		if out.Outcome != tc.want {
			t.Errorf("%s with the intent %s = %s, want %s", tc.op, tc.state, out.Outcome, tc.want)
		}
		if out.Outcome == provider.Failed && out.FailureCode != "no_effect_at_provider" {
			t.Errorf("%s with the intent %s: failure code %q, want no_effect_at_provider", tc.op, tc.state, out.FailureCode)
		}
	}
}

// Only an intent that can no longer be paid needs no release.
func TestPayable(t *testing.T) {
	t.Parallel()
	if !payable(nil) {
		t.Error("an answer without an intent proves nothing: payable")
	}
	for state, want := range map[provider.IntentState]bool{
		provider.IntentNeedsPaymentMethod: true, provider.IntentRequiresAction: true,
		provider.IntentRequiresConfirmation: true, provider.IntentProcessing: true, provider.IntentOther: true,
		provider.IntentCanceled: false, provider.IntentAuthorized: false, provider.IntentCaptured: false,
	} {
		if got := payable(&provider.Intent{State: state}); got != want {
			t.Errorf("payable(%s) = %v, want %v", state, got, want)
		}
	}
	// A payment Mercado Pago rejected awaits nothing: no release is armed.
	closed := &provider.Intent{State: provider.IntentNeedsPaymentMethod, Closed: true}
	if payable(closed) {
		t.Error("a closed intent is payable")
	}
	p := &Payment{Status: StatusDeclined, ProviderPaymentID: "123"}
	if needsRelease(p, OpAuthorize, closed) {
		t.Error("a decline whose payment is closed arms a release")
	}
}
