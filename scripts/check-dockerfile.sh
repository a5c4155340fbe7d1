#!/usr/bin/env bash
# `make verify`: the Dockerfile keeps the properties operations rely on.
# There is no docker engine in CI, so this reads the file:
#   - the production image (the last stage, the default target) has a
#     HEALTHCHECK through `payments healthcheck` and no simulator;
#   - the simulator has its own target;
#   - GOTOOLCHAIN=local, with a Go image at least as new as go.mod asks;
#   - no `go mod download` (it fetches the tool dependencies) and the
#     production build compiles only ./cmd/payments;
#   - the production build stamps --build-arg VERSION into the binary;
#   - a documented stop timeout longer than the drain (PROVIDER_TIMEOUT + 5s).
# No pipefail: `printf | grep -q` would fail whenever grep quits before
# printf has written (SIGPIPE), and the checks below read grep's answer.
set -eu
cd "$(dirname "$0")/.."
DOCKERFILE="${1:-Dockerfile}"

fail=0
bad() { echo "check-dockerfile: $DOCKERFILE: $*" >&2; fail=1; }

# Instructions only, continuation lines joined, comments dropped.
instructions="$(sed -e 's/^[[:space:]]*#.*$//' "$DOCKERFILE" | sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' | grep -v '^[[:space:]]*$')"
last_stage="$(printf '%s\n' "$instructions" | awk 'toupper($1)=="FROM"{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}')"

# The production image.
printf '%s\n' "$last_stage" | grep -qiE '^HEALTHCHECK .*CMD \["/payments", *"healthcheck"' ||
	bad 'the last stage (the production image) needs HEALTHCHECK ... CMD ["/payments", "healthcheck"]'
printf '%s\n' "$last_stage" | grep -qi 'providersim' &&
	bad 'the production image (the last stage) must not contain the provider simulator'
printf '%s\n' "$last_stage" | grep -qE '^ENTRYPOINT \["/payments"\]' ||
	bad 'the production image must run /payments'
printf '%s\n' "$instructions" | grep -qiE '^FROM .* AS providersim$' ||
	bad 'the provider simulator needs its own target: FROM ... AS providersim'

# The build.
printf '%s\n' "$instructions" | grep -qE '^ENV .*GOTOOLCHAIN=local' || bad 'the build must set ENV GOTOOLCHAIN=local'
printf '%s\n' "$instructions" | grep -qE 'GOTOOLCHAIN=(auto|go)' && bad 'GOTOOLCHAIN must not download a toolchain'
printf '%s\n' "$instructions" | grep -qE 'go mod download' &&
	bad '`go mod download` fetches the tool dependencies too; build the commands instead'
printf '%s\n' "$instructions" | grep -E '^RUN .*go (build|install)' | grep -qE '\./\.\.\.|go install' &&
	bad 'build only the commands the images need (./cmd/payments, ./cmd/providersim), not ./... or go install'
build_stage="$(printf '%s\n' "$instructions" | awk -v s="$(printf '%s\n' "$last_stage" | grep -oE '^COPY --from=[^ ]+' | head -1 | cut -d= -f2)" \
	'toupper($1)=="FROM"{on=(tolower($NF)==tolower(s))} on')"
printf '%s\n' "$build_stage" | grep -E '^RUN .*go build' | grep -q './cmd/payments' ||
	bad 'the stage the production image copies from must build ./cmd/payments'
printf '%s\n' "$build_stage" | grep -E '^RUN .*go build' | grep -q -- '-X github.com/acmepay/payments/internal/buildinfo.Version=${VERSION}' ||
	bad 'the production build must stamp the version: ARG VERSION and -ldflags "-X github.com/acmepay/payments/internal/buildinfo.Version=${VERSION}"'
printf '%s\n' "$build_stage" | grep -qE '^ARG VERSION' ||
	bad 'the production build stage needs ARG VERSION (docker build --build-arg VERSION=$(git describe --always --dirty))'
printf '%s\n' "$build_stage" | grep -E '^RUN .*go build' | grep -q 'providersim' &&
	bad 'the production build stage must not build the simulator'

# The Go image must be at least go.mod's release, or GOTOOLCHAIN=local fails.
want="$(awk '$1=="go"{print $2; exit}' go.mod)"
have="$(printf '%s\n' "$instructions" | grep -oiE '^FROM golang:[0-9][0-9.]*' | head -1 | cut -d: -f2)"
if [ -z "$have" ]; then
	bad 'the build stage must use a golang:<version> image with a version number'
elif [ "$(printf '%s\n%s\n' "$want" "$have" | sort -V | head -1)" != "$want" ]; then
	bad "golang:$have is older than go.mod's go $want"
elif [ "$(printf '%s' "$have" | tr -cd . | wc -c)" -lt 2 ]; then
	bad "pin the Go image to a patch release (golang:$want), not golang:$have"
fi

# The stop timeout: documented, and longer than the drain.
timeout_s="$(grep -oE 'stop-timeout: *[0-9]+s' "$DOCKERFILE" | head -1 | grep -oE '[0-9]+' || true)"
provider_timeout_s="$(grep -oE 'Name: *"PROVIDER_TIMEOUT", *Default: *"[0-9]+s"' internal/settings/settings.go | grep -oE '"[0-9]+s"' | tr -dc 0-9 || true)"
if [ -z "$timeout_s" ]; then
	bad 'document the stop timeout as "stop-timeout: <N>s"'
elif [ -z "$provider_timeout_s" ]; then
	bad 'cannot find the PROVIDER_TIMEOUT default in internal/settings/settings.go to compare the stop timeout with; update this check'
elif [ "$timeout_s" -le $((provider_timeout_s + 5)) ]; then
	bad "stop-timeout ${timeout_s}s is not longer than the drain (PROVIDER_TIMEOUT ${provider_timeout_s}s + 5s)"
fi

[ "$fail" -eq 0 ] || exit 1
echo "check-dockerfile: $DOCKERFILE ok"
