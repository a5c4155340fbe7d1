package payment

import (
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// ContainsCardNumber is the one detector of card numbers in client text:
// it reports whether s holds a run of 13 to 19 digits that passes the Luhn
// check. The text is read after Unicode NFKC, and a digit of any script
// (full-width, Arabic-Indic, Devanagari…) counts as its value. Digits may
// be grouped by single separators as a card number is printed or pasted
// (space, U+00A0, - _ . / , :); then any consecutive groups adding up to 13
// to 19 digits count. A group of 20 or more digits in a row is not read as
// a card number, nor is a part of one.
func ContainsCardNumber(s string) bool {
	if asciiWithFewDigits(s) {
		return false
	}
	var groups [][]byte
	var cur []byte
	sep := false // the last rune was a separator after a digit
	for _, r := range norm.NFKC.String(s) {
		if v, ok := digitValue(r); ok {
			cur = append(cur, byte('0'+v))
			sep = false
			continue
		}
		if !sep && len(cur) > 0 && isCardSeparator(r) {
			groups, cur, sep = append(groups, cur), nil, true
			continue
		}
		if len(cur) > 0 {
			groups = append(groups, cur)
		}
		if cardInGroups(groups) {
			return true
		}
		groups, cur, sep = groups[:0], nil, false
	}
	if len(cur) > 0 {
		groups = append(groups, cur)
	}
	return cardInGroups(groups)
}

// asciiWithFewDigits reports whether s is ASCII (which NFKC leaves as it
// is) with fewer digits than the shortest card number: most strings, which
// then need no closer look.
func asciiWithFewDigits(s string) bool {
	n := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return false
		case '0' <= c && c <= '9':
			n++
		}
	}
	return n < minCardDigits
}

// minCardDigits is the length of the shortest card number.
const minCardDigits = 13

// cardInGroups reports whether consecutive groups of one run of digits
// make a Luhn-valid number of 13 to 19 digits.
func cardInGroups(groups [][]byte) bool {
	var digits []byte
	for a := range groups {
		digits = digits[:0]
		for b := a; b < len(groups); b++ {
			digits = append(digits, groups[b]...)
			if len(digits) > 19 {
				break
			}
			if len(digits) >= minCardDigits && luhn(digits) {
				return true
			}
		}
	}
	return false
}

// isCardSeparator lists the single characters that may stand between the
// digit groups of a card number (after NFKC, U+00A0 is a space; it is kept
// for clarity).
func isCardSeparator(r rune) bool {
	switch r {
	case ' ', '\u00a0', '-', '_', '.', '/', ',', ':':
		return true
	}
	return false
}

// digitValue is the value of a decimal digit of any script. Unicode
// allocates each script's digits 0 to 9 as consecutive code points, so
// within a range of the Nd table (one or more whole such blocks) the value
// is the offset from the range's start, modulo 10.
func digitValue(r rune) (int, bool) {
	if r >= '0' && r <= '9' {
		return int(r - '0'), true
	}
	if r < 0x80 || !unicode.IsDigit(r) {
		return 0, false
	}
	for _, g := range unicode.Nd.R16 {
		if rune(g.Lo) <= r && r <= rune(g.Hi) {
			return int(r-rune(g.Lo)) % 10, true
		}
	}
	for _, g := range unicode.Nd.R32 {
		if rune(g.Lo) <= r && r <= rune(g.Hi) {
			return int(r-rune(g.Lo)) % 10, true
		}
	}
	return 0, false
}

func isDigitOfAnyScript(r rune) bool {
	_, ok := digitValue(r)
	return ok
}

func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i] - '0')
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}
