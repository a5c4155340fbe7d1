package apitest

import (
	"sync"
	"testing"
	"time"
)

// Only the test goroutine may end a test (t.Fatal, t.FailNow, t.Skip): from
// any other goroutine FailNow stops that goroutine alone, and the test hangs
// waiting for what it would have sent, or passes with the assertion unmade.
// So a goroutine of a test uses TryDo or DoAsync and hands its outcome back,
// and the test goroutine asserts on it. TestNoFailNowOffTheTestGoroutine
// keeps it so.

// WaitTimeout bounds every wait of a test goroutine on another goroutine: a
// request that never reaches the provider, or never comes back, fails the
// test with what it was waiting for, instead of hanging until go test's
// -timeout kills the whole binary.
const WaitTimeout = 30 * time.Second

// Recv returns the next value from ch, failing the test if none arrives
// within WaitTimeout. what completes "timed out waiting for ...".
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	timer := time.NewTimer(WaitTimeout)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
		var zero T
		return zero
	}
}

// Wait waits for wg like Recv.
func Wait(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	Recv(t, done, what)
}

// Outcome is what a request made on another goroutine hands back to the
// test goroutine: the response, or the transport error that prevented it.
type Outcome struct {
	*Response
	Err error
}

// DoAsync makes the request on another goroutine, for a test that must act
// while it is in flight (typically held at the provider). Its one Outcome
// arrives on the channel; read it with Await.
func (e *Env) DoAsync(r Request) <-chan Outcome {
	ch := make(chan Outcome, 1)
	go func() {
		resp, err := e.TryDo(r)
		ch <- Outcome{Response: resp, Err: err}
	}()
	return ch
}

// Await receives an Outcome like Recv and returns its response; a transport
// error fails the test, as Do does.
func Await(t testing.TB, ch <-chan Outcome, what string) *Response {
	t.Helper()
	o := Recv(t, ch, what)
	if o.Err != nil {
		t.Fatalf("%s: %v", what, o.Err)
	}
	return o.Response
}
