package main

// The command line around the commands: which of the serving (app-level)
// flags a subcommand reads, help that shows only those, an error for the
// others, and a version for builds without the Makefile's ldflags.

import (
	"context"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"

	"github.com/alecthomas/kingpin/v2"
	"github.com/go-kit/log"
	"github.com/prometheus/common/version"
)

// commonFlags are the app-level flags every command honours.
var commonFlags = []string{"help", "log.level", "log.format"}

// vllmAccessFlags are the app-level flags a command that talks to vLLM
// reads (the scraper's and the probes' address, credentials and proxy).
var vllmAccessFlags = []string{
	"vllm.url", "vllm.timeout", "vllm.api-key-file", "vllm.basic-auth-username",
	"vllm.basic-auth-password-file", "vllm.proxy-from-environment", "vllm.server",
}

// commandUses says whether command cmd reads the app-level flag name: its
// own uses (a trailing "." matches a prefix: "model." is every --model.*
// flag) or a common flag.
func commandUses(cmd *command, name string) bool {
	for _, u := range append(slices.Clone(commonFlags), cmd.uses...) {
		if u == name || (strings.HasSuffix(u, ".") && strings.HasPrefix(name, u)) {
			return true
		}
	}
	return false
}

// command is a subcommand (`rules`, `diagnose`, `capacity`), listed in
// newCLI. Serving stays the default command, so `vllm_exporter
// --vllm.url=...` needs no subcommand.
type command struct {
	name, help string
	// uses names the app-level (serving) flags the command reads besides
	// its own; a trailing "." is a prefix. Its help lists only those, and
	// any other serving flag is an error.
	uses []string
	// run runs the command once the command line is parsed.
	run func(ctx context.Context, logger log.Logger) error
}

func findCommand(commands []command, name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// usageTemplate is kingpin's default template, except that a subcommand's
// help lists its own flags and then only the app-level flags it reads
// (kingpin would list every serving flag before them).
var usageTemplate = strings.Replace(kingpin.DefaultUsageTemplate,
	"{{if .Context.Flags -}}\nFlags:\n{{.Context.Flags|FlagsToTwoColumns|FormatTwoColumns}}",
	"{{if .Context.Flags -}}\nFlags:\n{{CommandFlags .Context.SelectedCommand .Context.Flags|FlagsToTwoColumns|FormatTwoColumns}}", 1)

// usageFuncs backs usageTemplate.
func usageFuncs(commands []command) template.FuncMap {
	return template.FuncMap{"CommandFlags": func(sel *kingpin.CmdModel, all []*kingpin.FlagModel) []*kingpin.FlagModel {
		if sel == nil {
			return all
		}
		cmd := findCommand(commands, sel.FullCommand)
		if cmd == nil { // serve: every flag is a serving flag
			return all
		}
		own := map[string]bool{}
		var out []*kingpin.FlagModel
		for _, f := range sel.Flags {
			own[f.Name] = true
			out = append(out, f)
		}
		for _, f := range all {
			if !own[f.Name] && commandUses(cmd, f.Name) {
				out = append(out, f)
			}
		}
		return out
	}}
}

// checkCommandFlags rejects app-level flags given to a subcommand that does
// not read them: `vllm_exporter rules --web.listen-address=...` would
// otherwise be silently ignored.
func checkCommandFlags(app *kingpin.Application, commands []command, cmdName string, args []string) error {
	cmd := findCommand(commands, cmdName)
	if cmd == nil {
		return nil
	}
	ctx, err := app.ParseContext(args)
	if err != nil {
		return err
	}
	for _, el := range ctx.Elements {
		f, ok := el.Clause.(*kingpin.FlagClause)
		if !ok {
			continue
		}
		name := f.Model().Name
		if app.GetFlag(name) != f || commandUses(cmd, name) {
			continue // the command's own flag, or one it reads
		}
		return fmt.Errorf("--%s is a flag of the exporter, not of %s (see: %s help %s)", name, cmdName, program, cmdName)
	}
	return nil
}

// fillVersionFromBuildInfo gives a binary built without the Makefile's
// ldflags (`go run`, `go install ...@v0.1.0`, a plain `go build`) a version.
func fillVersionFromBuildInfo() {
	if info, ok := debug.ReadBuildInfo(); ok {
		versionFromBuildInfo(info)
	}
}

// versionFromBuildInfo fills what the ldflags left empty: the version from
// the module version Go records (v0.1.0 for `go install ...@v0.1.0`, a
// pseudo-version for a build in a git checkout, "devel" when Go knows none),
// the build date from the commit time.
func versionFromBuildInfo(info *debug.BuildInfo) {
	if version.Version == "" {
		version.Version = info.Main.Version
		if version.Version == "" || version.Version == "(devel)" {
			version.Version = "devel"
		}
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.time" && version.BuildDate == "" {
			version.BuildDate = s.Value
		}
	}
	if version.BuildUser == "" {
		version.BuildUser = "go"
	}
}
