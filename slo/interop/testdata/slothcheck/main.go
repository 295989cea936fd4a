// Command slothcheck runs Sloth's own loader, validation and rule generator
// (github.com/slok/sloth/pkg/lib, what `sloth generate` runs) on a Sloth
// prometheus/v1 spec read from stdin and prints the Prometheus rules.
//
//	slothcheck [period [windows-dir]] < spec.yml
//
// period is the SLO period (Go duration, default 720h: 30d), windows-dir a
// directory of Sloth AlertWindows files (as --slo-period-windows-path).
package main

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	sloth "github.com/slok/sloth/pkg/lib"
)

func main() {
	period := 30 * 24 * time.Hour
	if len(os.Args) > 1 {
		d, err := time.ParseDuration(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		period = d
	}
	var windows fs.FS
	if len(os.Args) > 2 {
		windows = os.DirFS(os.Args[2])
	}
	spec, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	gen, err := sloth.NewPrometheusSLOGenerator(sloth.PrometheusSLOGeneratorConfig{DefaultSLOPeriod: period, WindowsFS: windows})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx := context.Background()
	res, err := gen.GenerateFromRaw(ctx, spec)
	if err != nil {
		fmt.Fprintln(os.Stderr, "sloth:", err)
		os.Exit(1)
	}
	if err := gen.WriteResultAsPrometheusStd(ctx, *res, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
