package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// cliCommand is one subcommand as its help shows it.
type cliCommand struct {
	name     string // as typed: "accounts create"
	synopsis string // its flags
	summary  string // one line for the command list
	details  string // the rest of its --help
}

// commands lists every subcommand; `payments --help` and
// `payments <command> --help` are built from it.
var commands = []cliCommand{
	{name: "serve", summary: "run the HTTP API and the background workers",
		details: `Applies pending migrations, then serves the API, /healthz, /readyz and
/metrics on HTTP_ADDR (on METRICS_ADDR alone when that is set), with the
reconciler, the outbox relay and the retention purge. SIGTERM drains in-flight requests (up to PROVIDER_TIMEOUT
plus 5s) before exit. Any number of instances may start at once.

settings: DATABASE_URL, ENCRYPTION_KEY (required); HTTP_ADDR, ADMIN_TOKEN
(at least 32 characters), METRICS_ADDR, TRUSTED_PROXY_CIDRS, STRIPE_API_BASE, PROVIDER_TIMEOUT, IN_PROGRESS_LEASE and the rest listed in
docs/configuration.md; tracing: OTEL_EXPORTER_OTLP_ENDPOINT (unset: off), OTEL_SERVICE_NAME,
OTEL_TRACES_SAMPLER, OTEL_SDK_DISABLED (docs/observability.md).`},
	{name: "migrate", synopsis: "[status]", summary: "apply database migrations, or list them with status",
		details: `Applies pending migrations (goose up) under a PostgreSQL session lock, so
many instances may run it at once.

status lists every migration this binary carries, one a line: applied (with
when) or pending; then, when a newer release has migrated the database
further, the newest version it applied ("newer"). Changes nothing and takes
no lock. Upgrade rules: docs/upgrading.md.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "reconcile", synopsis: "--once | --audit [--since D]", summary: "one reconciliation or audit pass for a cron job; prints a JSON summary",
		details: `--once asks the provider about every payment whose outcome is unknown,
records what it says, and prints {"examined":…,"resolved":{…},"still_unknown":…}.

--audit compares every final payment changed within --since (a Go duration,
default AUDIT_WINDOW) with the provider: status, amounts captured and
refunded, disputes. Each difference is stored as an open discrepancy (see
GET /admin/v1/discrepancies); nothing is changed and no money moves. Prints
{"examined":…,"found":{kind:n},"new":…,"skipped":…,"lookups_failed":…}.

Either exits 0 unless it could not run.

settings: DATABASE_URL, ENCRYPTION_KEY (required); STRIPE_API_BASE,
RECONCILE_AFTER, RECONCILE_RATE, PROVIDER_TIMEOUT, AUDIT_WINDOW, AUDIT_RATE.`},
	{name: "accounts create", synopsis: "--name N --stripe-key K [--webhook-secret S]",
		summary: `create an account; prints {"id":…,"api_key":…}`,
		details: `The API key is shown only now; only its hash is stored. The provider
secrets are stored encrypted under ENCRYPTION_KEY; two accounts can never
share one Stripe secret key, nor one Mercado Pago access token.

--mercadopago-access-token T [--mercadopago-webhook-secret S] gives the
account Mercado Pago credentials, beside Stripe's or instead of them
(--stripe-key is then optional); Stripe comes first when both are given.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "accounts list", summary: "list the accounts, one JSON object a line, without secrets",
		details: `Prints id, name, created_at, has_webhook_secret and, after a rotation,
api_key_rotated_at and previous_api_key_valid_until (while the old key is
still accepted), and providers (stripe, mercadopago, in the order added).
Decrypts nothing and prints no key or secret.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "accounts reencrypt", synopsis: "",
		summary: "re-encrypt every stored secret with ENCRYPTION_KEY after a key rotation",
		details: `Run after setting ENCRYPTION_KEY to the new key and ENCRYPTION_KEY_PREVIOUS
to the old one; prints {"examined":…,"reencrypted":…,"canary_reencrypted":…}.
Safe to run again, or on two machines at once. Then unset
ENCRYPTION_KEY_PREVIOUS.

settings: DATABASE_URL, ENCRYPTION_KEY (required), ENCRYPTION_KEY_PREVIOUS.`},
	{name: "accounts rotate-api-key", synopsis: "--account ID [--grace D]",
		summary: "give an account a new API key, printed once; the old one stays valid for a grace period",
		details: `Prints {"id":…,"api_key":…,"previous_api_key_valid_until":…}. The old key is
accepted until then (--grace, a Go duration; default 24h; 0 ends it at
once, though an instance may trust a key it checked in the last 30s for
that long). Rotating again ends any earlier key at once: an account has at
most two valid keys.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "accounts routing", synopsis: "--account ID [--file F]",
		summary: "show an account's routing, or set it from a JSON file",
		details: `Without --file, prints the routing the account's creates follow:
{"rules":[…],"default":[…]}; an account without one prints no rules and its
providers in the order they were added. With --file, sets the routing the
file holds, in the body PUT /admin/v1/accounts/{id}/routing takes:

  {"rules":[{"match":{"payment_method":"pix","currency":"BRL",
     "min_amount":100,"max_amount":50000},"providers":["mercadopago","stripe"]}],
   "default":["stripe"]}

and prints it as stored. The first rule that matches a create gives its
providers in order (every match field optional; payment_method is card, pix
or boleto); default when none matches. Only providers the account has
credentials for; at most 50 rules. A running instance may route by the
former routing for up to 30s.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "operators create", synopsis: "--name N",
		summary: `create a named console operator; prints {"id":…,"name":…,"token":…}`,
		details: `The operator signs in to /console/ with the token, shown only now; only its
SHA-256 is stored. Every console action the operator takes is audited
under this name, and nobody signing in with the shared ADMIN_TOKEN may
use it. Names are unique whatever their case.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "operators list", summary: "list the console operators, one JSON object a line, without tokens",
		details: `Prints id, name, created_at and, for a disabled operator, disabled_at.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "operators disable", synopsis: "--name N",
		summary: "disable a console operator: its token signs in no more and its sessions end",
		details: `Exits 1 when no enabled operator has that name.

settings: DATABASE_URL, ENCRYPTION_KEY (required).`},
	{name: "webhooks listen", synopsis: listenSynopsis,
		summary: "receive this service's webhooks locally: verify each signature, print each event",
		details: `Listens on --addr (default ` + defaultListenAddr + `; port 0 picks a free one) and
verifies every POST with the endpoint's Standard Webhooks secret. Each
verified event is one line on stdout:

  evt_… payment.captured payment=pay_… status=captured version=4 cursor=…

answered 204; a delivery seen before (the same webhook-id: a retry or a
redelivery) is printed again, marked "(repeat)". A missing or wrong
signature, a stale timestamp or a body that is not an event is answered 400
with one line on stderr. Runs until SIGINT or SIGTERM, then exits 0.

The secret is --secret or WEBHOOK_SECRET. With --register instead, it
registers http://<addr>/ for --events (default *) through the service's
POST /v1/webhook_endpoints on --api-url (default http://127.0.0.1:8080) with
--api-key or PAYMENTS_API_KEY, and uses the secret the service returns; an
endpoint left at the same URL by an earlier run is enabled and given a new
secret instead. The service must run with WEBHOOK_ALLOW_PRIVATE=true to
accept a local http URL. Neither the secret nor the key is ever printed.

settings: WEBHOOK_SECRET, PAYMENTS_API_KEY only.`},
	{name: "version", summary: "print the version, commit and Go version of this build",
		details: `Prints the version stamped at build time (make build and the image stamp
git describe --always --dirty), else the VCS revision Go recorded, else
(devel); then the commit, its time and whether the tree was modified, the
Go version and platform. The payments_build_info metric carries the same
version. Reads no setting.`},
	{name: "healthcheck", synopsis: "[--url U] [--timeout D]",
		summary: "exit 0 when the service's /readyz answers 200 (for container health checks)",
		details: `GETs /readyz (database reachable, migrations applied) of the service on
HTTP_ADDR (default :8080, asked on 127.0.0.1 when the host is empty or a
wildcard), or --url (a URL without a path gets /readyz). Exits 0 on 200, 1
otherwise, with one line saying why. --timeout defaults to 5s.

settings: HTTP_ADDR only.`},
}

// groups are words that only lead to subcommands.
var groups = map[string]string{
	"accounts":  "account administration",
	"operators": "the console's named operators",
	"webhooks":  "the service's webhooks, received on this machine",
}

// usageError is a command line mistake: exit status 2, not 1.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usageErrorf(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

func isUsageError(err error) bool {
	var ue *usageError
	return errors.As(err, &ue)
}

func topUsage() string {
	var b strings.Builder
	b.WriteString("usage: payments <command> [flags]\n\ncommands:\n")
	for _, c := range commands {
		line := c.name
		if c.synopsis != "" {
			line += " " + c.synopsis
		}
		fmt.Fprintf(&b, "  %s\n      %s\n", line, c.summary)
	}
	b.WriteString("\nSettings come from the environment (see docs/configuration.md).\n" +
		"payments <command> --help describes one command and exits without reading any.\n")
	return b.String()
}

func commandUsage(c cliCommand) string {
	line := "usage: payments " + c.name
	if c.synopsis != "" {
		line += " " + c.synopsis
	}
	return line + "\n\n" + strings.ToUpper(c.summary[:1]) + c.summary[1:] + ".\n\n" + c.details + "\n"
}

func groupUsage(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: payments %s <command> [flags]\n\n%s:\n", group, groups[group])
	for _, c := range commands {
		if strings.HasPrefix(c.name, group+" ") {
			line := c.name
			if c.synopsis != "" {
				line += " " + c.synopsis
			}
			fmt.Fprintf(&b, "  %s\n      %s\n", line, c.summary)
		}
	}
	return b.String()
}

func lookupCommand(name string) (cliCommand, bool) {
	for _, c := range commands {
		if c.name == name {
			return c, true
		}
	}
	return cliCommand{}, false
}

// wantsHelp: `payments help …`, or -h, -help or --help anywhere before "--".
func wantsHelp(args []string) bool {
	if len(args) > 0 && args[0] == "help" {
		return true
	}
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// help prints the help of the command named by the leading words of args.
func help(args []string, stdout io.Writer) error {
	var words []string
	for _, a := range args {
		if a == "help" && len(words) == 0 {
			continue
		}
		if strings.HasPrefix(a, "-") {
			break
		}
		words = append(words, a)
	}
	switch {
	case len(words) == 0:
		fmt.Fprint(stdout, topUsage())
		return nil
	case len(words) >= 2:
		if c, ok := lookupCommand(words[0] + " " + words[1]); ok {
			fmt.Fprint(stdout, commandUsage(c))
			return nil
		}
	}
	if c, ok := lookupCommand(words[0]); ok {
		fmt.Fprint(stdout, commandUsage(c))
		return nil
	}
	if _, ok := groups[words[0]]; ok {
		fmt.Fprint(stdout, groupUsage(words[0]))
		return nil
	}
	return usageErrorf("unknown command %q (see payments --help)", strings.Join(words, " "))
}

// withoutSettings handles everything that must work with no configuration:
// no command, help, version, healthcheck, unknown commands and stray
// arguments. done reports whether the command was handled here.
func withoutSettings(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) (done bool, err error) {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return true, usageErrorf("a command is required")
	}
	if wantsHelp(args) {
		return true, help(args, stdout)
	}
	switch args[0] {
	case "version":
		if err := noArguments("version", args[1:]); err != nil {
			return true, err
		}
		return true, printVersion(stdout)
	case "healthcheck":
		return true, healthcheck(ctx, args[1:], getenv, stdout)
	case "webhooks":
		return true, webhooksCommand(ctx, args[1:], getenv, stdout, stderr)
	case "migrate":
		if len(args) == 2 && args[1] == "status" {
			return false, nil
		}
		if len(args) > 1 {
			return true, usageErrorf("migrate takes no arguments other than status, got %q (see payments migrate --help)", args[1])
		}
		return false, nil
	case "serve":
		if err := noArguments(args[0], args[1:]); err != nil {
			return true, err
		}
		return false, nil
	case "reconcile", "accounts", "operators":
		return false, nil
	}
	fmt.Fprint(stderr, topUsage())
	return true, usageErrorf("unknown command %q", args[0])
}

func noArguments(name string, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments, got %q (see payments %s --help)", name, args[0], name)
	}
	return nil
}

// parseFlags parses a command's flags and names every required one that is
// missing or empty.
func parseFlags(fs *flag.FlagSet, args []string, required ...string) error {
	return parseFlagsRequiring(fs, args, func() []string { return required })
}

// parseFlagsRequiring is parseFlags with required flags that depend on the
// values parsed.
func parseFlagsRequiring(fs *flag.FlagSet, args []string, requiredFn func() []string) error {
	fs.SetOutput(io.Discard)
	c, _ := lookupCommand(fs.Name())
	if err := fs.Parse(args); err != nil {
		return usageErrorf("%s: %v (usage: payments %s %s)", fs.Name(), err, fs.Name(), c.synopsis)
	}
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q (usage: payments %s %s)", fs.Name(), fs.Arg(0), fs.Name(), c.synopsis)
	}
	var missing []string
	for _, name := range requiredFn() {
		if f := fs.Lookup(name); f == nil || f.Value.String() == "" {
			missing = append(missing, "--"+name)
		}
	}
	if len(missing) > 0 {
		return usageErrorf("%s: missing %s (usage: payments %s %s)", fs.Name(), strings.Join(missing, ", "), fs.Name(), c.synopsis)
	}
	return nil
}
