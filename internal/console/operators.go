package console

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acmepay/payments/internal/payment"
)

// Operator is a named console user with a token of its own; the audit
// trail names it on every action it takes.
type Operator struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	CreatedAt  time.Time  `json:"created_at"`
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

// operatorTokenPrefix tells an operator's token from the admin token at
// sign-in, before anything is looked up.
const operatorTokenPrefix = "op_"

// ErrOperatorNameTaken: another operator has that name, in any case.
var ErrOperatorNameTaken = errors.New("an operator with that name exists")

// OperatorStore keeps the operators; only the SHA-256 of a token is stored.
type OperatorStore interface {
	ConsoleOperatorCreate(ctx context.Context, op Operator, tokenHash []byte) error
	ConsoleOperatorList(ctx context.Context) ([]Operator, error)
	ConsoleOperatorDisable(ctx context.Context, name string, now time.Time) (bool, error)
}

// CheckOperatorName refuses a name the audit trail could not carry.
func CheckOperatorName(name string) error {
	switch {
	case name == "" || utf8.RuneCountInString(name) > 100:
		return errors.New("an operator's name has 1 to 100 characters")
	case !payment.ValidText(name) || strings.TrimSpace(name) != name:
		return errors.New("an operator's name is plain text without leading or trailing spaces")
	case payment.ContainsCardNumber(name):
		return errors.New("an operator's name must not hold a card number")
	}
	return nil
}

// CreateOperator stores a new operator and returns its token, which is
// shown this once: 256 random bits, so a plain SHA-256 of it is enough to
// store (nothing to guess, unlike a password).
func CreateOperator(ctx context.Context, s OperatorStore, name string, now time.Time) (Operator, string, error) {
	if err := CheckOperatorName(name); err != nil {
		return Operator{}, "", err
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Operator{}, "", err
	}
	token := operatorTokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	id := make([]byte, 12)
	if _, err := rand.Read(id); err != nil {
		return Operator{}, "", err
	}
	op := Operator{ID: "opr_" + base64.RawURLEncoding.EncodeToString(id), Name: name, CreatedAt: now.UTC()}
	if err := s.ConsoleOperatorCreate(ctx, op, idHash(token)); err != nil {
		return Operator{}, "", err
	}
	return op, token, nil
}

// isOperatorToken: the sign-in may carry an operator's token, looked up by
// its hash; an admin token that happens to start so is still compared.
func isOperatorToken(token string) bool { return strings.HasPrefix(token, operatorTokenPrefix) }
