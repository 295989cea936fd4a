package main

import (
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"

	"github.com/vllm-exporter/vllm_exporter/internal/testutil"
)

// TestDocsDocumentEveryFlag keeps the documentation (README.md and docs/)
// true for a newcomer: every flag the binary accepts, on the serve command
// and on each subcommand, must be documented there as `--name`.
func TestDocsDocumentEveryFlag(t *testing.T) {
	readme := []byte(testutil.DocsText(t))
	model := newCLI().app.Model()
	check := func(where string, flags []*kingpin.FlagModel) {
		for _, f := range flags {
			if f.Hidden || f.Name == "help" || f.Name == "version" || f.Name == "help-long" || f.Name == "help-man" || f.Name == "completion-bash" || f.Name == "completion-script-bash" || f.Name == "completion-script-zsh" {
				continue
			}
			// --name, not a prefix of a longer flag (--vllm.url vs --vllm.url-x).
			documented := regexp.MustCompile(`--(\[no-\])?` + regexp.QuoteMeta(f.Name) + `([^a-z0-9._-]|$)`)
			if !documented.Match(readme) {
				t.Errorf("the docs (README.md, docs/) do not document %s flag --%s (%s)", where, f.Name, f.Help)
			}
		}
	}
	check("serve", model.Flags)
	for _, c := range model.Commands {
		check(c.Name, c.Flags)
		if !strings.Contains(string(readme), program+" "+c.Name) && c.Name != "serve" && c.Name != "help" {
			t.Errorf("the docs (README.md, docs/) do not show the %q subcommand (as `%s %s`)", c.Name, program, c.Name)
		}
	}
}
