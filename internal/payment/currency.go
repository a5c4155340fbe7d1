package payment

import (
	"fmt"
	"strings"

	"golang.org/x/text/currency"
)

// supportedCurrencies are the ISO 4217 codes the provider accepts for a
// charge: Stripe's presentment currencies. The X-codes for funds, metals,
// testing and "no currency" (XXX, XTS, XAU, …) and the funds codes (BOV,
// CLF, USN, …) are not among them; the CFA and CFP francs and the East
// Caribbean dollar (XAF, XOF, XPF, XCD) are real currencies and are.
// Amounts are always in the currency's smallest unit, so for the
// zero-decimal ones (JPY, KRW, CLP, …) 2000 means 2000 yen.
var supportedCurrencies = map[string]bool{}

func init() {
	const codes = `AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BIF BMD BND
BOB BRL BSD BWP BYN BZD CAD CDF CHF CLP CNY COP CRC CVE CZK DJF DKK DOP DZD
EGP ETB EUR FJD FKP GBP GEL GIP GMD GNF GTQ GYD HKD HNL HTG HUF IDR ILS INR
ISK JMD JPY KES KGS KHR KMF KRW KYD KZT LAK LBP LKR LRD LSL MAD MDL MGA MKD
MMK MNT MOP MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB PEN PGK PHP
PKR PLN PYG QAR RON RSD RUB RWF SAR SBD SCR SEK SGD SHP SOS SRD SZL THB
TJS TOP TRY TTD TWD TZS UAH UGX USD UYU UZS VND VUV WST XAF XCD XOF XPF YER
ZAR ZMW`
	for _, c := range strings.Fields(codes) {
		supportedCurrencies[c] = true
	}
}

// ParseCurrency normalizes a currency code to upper case and refuses
// anything that is not an ISO 4217 code the provider supports.
func ParseCurrency(s string) (string, error) {
	if len(s) != 3 {
		return "", fmt.Errorf("must be a three-letter ISO 4217 code")
	}
	u, err := currency.ParseISO(s)
	if err != nil {
		return "", fmt.Errorf("must be a three-letter ISO 4217 code")
	}
	code := u.String()
	if !supportedCurrencies[code] {
		return "", fmt.Errorf("is not a currency the provider supports")
	}
	return code, nil
}
