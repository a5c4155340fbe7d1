package main

import (
	"net/http/httptest"
	"sync"

	"github.com/acmepay/payments/internal/provider/providersim"
)

// simURL is a provider simulator shared by the commands that ask the
// provider (accounts create asks which account a key belongs to).
var simURL = sync.OnceValue(func() string {
	return httptest.NewServer(providersim.New(providersim.Options{})).URL
})
