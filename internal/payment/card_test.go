package payment

import (
	"math/rand/v2"
	"strings"
	"testing"
	"unicode"
)

func TestContainsCardNumberSeparatorsAndScripts(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"4111_1111_1111_1111":                true,
		"4111.1111.1111.1111":                true,
		"4111/1111/1111/1111":                true,
		"4111,1111,1111,1111":                true,
		"4111:1111:1111:1111":                true,
		"4111\u00a01111\u00a01111\u00a01111": true,
		"４１１１１１１１１１１１１１１１":                   true, // full-width
		"٤١١١١١١١١١١١١١١١":                   true, // Arabic-Indic
		"४१११-११११-११११-११११":                true, // Devanagari
		"４１１１－１１１１－１１１１－１１１１":                true, // full-width hyphen
		"pm_4111_1111_1111_1111":             true,
		"4111__1111_1111_1111":               false, // a double separator ends the run
		"4111;1111;1111;1111":                false, // not a listed separator
		"4111_1111_1111_1112":                false, // Luhn fails
		"order_2026_12_04":                   false,
	} {
		if got := ContainsCardNumber(s); got != want {
			t.Errorf("ContainsCardNumber(%q) = %v, want %v", s, got, want)
		}
	}
}

// TestDigitValueTable checks the assumption digitValue rests on: every
// range of the Nd table is made of whole blocks of ten digits.
func TestDigitValueTable(t *testing.T) {
	t.Parallel()
	for _, g := range unicode.Nd.R16 {
		if g.Stride != 1 || (g.Hi-g.Lo+1)%10 != 0 {
			t.Errorf("Nd range %#x-%#x is not whole blocks of ten", g.Lo, g.Hi)
		}
	}
	for _, g := range unicode.Nd.R32 {
		if g.Stride != 1 || (g.Hi-g.Lo+1)%10 != 0 {
			t.Errorf("Nd range %#x-%#x is not whole blocks of ten", g.Lo, g.Hi)
		}
	}
}

// digitScripts are the zeros of some scripts' digits: ASCII, full-width,
// Arabic-Indic, Extended Arabic-Indic, Devanagari, Bengali, Thai and
// mathematical bold (which NFKC folds to ASCII).
var digitScripts = []rune{'0', '０', '٠', '۰', '०', '০', '๐', '𝟎'}

// cardSeparators are the separators of CONTRACT §16, with the full-width
// forms NFKC folds into them.
var cardSeparators = []string{" ", "\u00a0", "-", "_", ".", "/", ",", ":", "－", "＿", "．", "／", "，", "："}

// luhnPAN makes a Luhn-valid number of n digits from a random source.
func luhnPAN(rng *rand.Rand, n int) []byte {
	d := make([]byte, n)
	for i := range n - 1 {
		d[i] = byte('0' + rng.IntN(10))
	}
	for c := byte('0'); c <= '9'; c++ {
		d[n-1] = c
		if luhn(d) {
			break
		}
	}
	return d
}

// cardForm writes a number in a random form: each digit in a random
// script, a random listed separator (or none) between digits.
func cardForm(rng *rand.Rand, pan []byte) string {
	var b strings.Builder
	sepRate := rng.IntN(4) // 0: never, else about one gap in sepRate+1
	for i, c := range pan {
		if i > 0 && sepRate > 0 && rng.IntN(sepRate+1) == 0 {
			b.WriteString(cardSeparators[rng.IntN(len(cardSeparators))])
		}
		b.WriteRune(digitScripts[rng.IntN(len(digitScripts))] + rune(c-'0'))
	}
	return b.String()
}

// FuzzContainsCardNumber generates Luhn-valid numbers of 13 to 19 digits in
// every form (separators, scripts, NBSP) inside arbitrary text: each must
// be found.
func FuzzContainsCardNumber(f *testing.F) {
	f.Add(uint64(1), uint8(0), "order ", " paid")
	f.Add(uint64(2), uint8(3), "", "")
	f.Add(uint64(42), uint8(6), "metadata: ", "\u00a0ok")
	f.Fuzz(func(t *testing.T, seed uint64, n uint8, prefix, suffix string) {
		rng := rand.New(rand.NewPCG(seed, uint64(n)))
		pan := luhnPAN(rng, 13+int(n)%7)
		s := cardForm(rng, pan)
		// A letter on each side keeps the surrounding text out of the run.
		text := prefix + "x" + s + "x" + suffix
		if !ContainsCardNumber(text) {
			t.Fatalf("missed card number %s written as %q in %q", pan, s, text)
		}
	})
}
