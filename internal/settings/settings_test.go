package settings

import (
	"strings"
	"testing"
)

func TestEnv(t *testing.T) {
	t.Parallel()
	env := Env(func(name string) string {
		if name == "PROVIDER_TIMEOUT" {
			return "3s"
		}
		return ""
	})
	if got := env("PROVIDER_TIMEOUT"); got != "3s" {
		t.Errorf("a set value reads %q, want 3s", got)
	}
	if got := env("IN_PROGRESS_LEASE"); got != "30s" {
		t.Errorf("an unset setting reads %q, want its default 30s", got)
	}
	if got := env("ADMIN_TOKEN"); got != "" {
		t.Errorf("an unset setting without a default reads %q", got)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "NOT_A_SETTING") {
			t.Errorf("an unlisted name: recover() = %v, want a panic naming it", r)
		}
	}()
	env("NOT_A_SETTING")
}

func TestAllNamesAreUniqueAndDocumented(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, s := range All {
		if seen[s.Name] || s.Doc == "" || s.ShownDefault() == "" {
			t.Errorf("%s: listed twice, or without a meaning or default", s.Name)
		}
		seen[s.Name] = true
	}
}
