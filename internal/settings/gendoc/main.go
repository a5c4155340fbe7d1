// Command gendoc writes docs/configuration.md from settings.All: the
// reference table of every setting, between prose kept in
// configuration.md.tmpl. `make config-diff` (in `make verify`) fails when
// the committed file is not what it writes.
package main

import (
	_ "embed"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"

	"github.com/acmepay/payments/internal/settings"
)

//go:embed configuration.md.tmpl
var page string

func main() {
	out := flag.String("o", "", "write to this file instead of stdout")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	var w io.Writer = os.Stdout
	if out != "" {
		f, err := os.Create(out)
		if err != nil {
			return err
		}
		defer f.Close()
		w = f
	}
	return render(w)
}

// render writes the page with the table in place of {{.Table}}.
func render(w io.Writer) error {
	t, err := template.New("configuration.md").Parse(page)
	if err != nil {
		return err
	}
	return t.Execute(w, struct{ Table string }{table(settings.All)})
}

// table is one Markdown table, a row per setting, with nothing between
// its rows.
func table(all []settings.Setting) string {
	var b strings.Builder
	b.WriteString("| variable | default | meaning |\n|---|---|---|\n")
	for _, s := range all {
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s.Name, cell(s.ShownDefault()), cell(s.Doc))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// cell keeps a value inside its table cell.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
