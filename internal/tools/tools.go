//go:build tools

// Package tools pins the module's dependencies before every package that
// uses them exists, so parallel work never races on go.mod.
package tools

import (
	_ "github.com/NVIDIA/go-nvml/pkg/nvml"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	_ "github.com/NVIDIA/go-nvml/pkg/nvml/mock/dgxa100"
	_ "github.com/alecthomas/kingpin/v2"
	_ "github.com/go-kit/log"
	_ "github.com/go-kit/log/level"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/collectors"
	_ "github.com/prometheus/client_golang/prometheus/collectors/version"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/prometheus/client_golang/prometheus/testutil/promlint"
	_ "github.com/prometheus/common/expfmt"
	_ "github.com/prometheus/common/model"
	_ "github.com/prometheus/common/promslog/flag"
	_ "github.com/prometheus/common/version"
	_ "github.com/prometheus/exporter-toolkit/web"
	_ "github.com/prometheus/exporter-toolkit/web/kingpinflag"
	_ "github.com/tjhop/slog-gokit"
	_ "gopkg.in/yaml.v3"
)
