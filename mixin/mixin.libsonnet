// vllm_exporter monitoring mixin: the alert and recording rules of alerts/
// and the Grafana dashboards of dashboards/, exactly as shipped (those files
// are generated and tested there), with a selector for your job.
//
//   jb install github.com/vllm-exporter/vllm_exporter@main
//   local vllm = (import 'github.com/vllm-exporter/vllm_exporter/mixin/mixin.libsonnet') + {
//     _config+:: { vllmSelector: 'job="vllm-exporter"' },
//   };
//   { 'alerts.yaml': std.manifestYamlDoc(vllm.prometheusAlerts), ... }
//
// The mixin imports ../alerts and ../dashboards, so vendor the whole
// repository (as above), not the mixin directory alone.
local promql = import 'lib/promql.libsonnet';

local ruleFiles = {
  'vllm-alerts.yml': std.parseYaml(importstr '../alerts/vllm-alerts.yml'),
  'vllm-recording.yml': std.parseYaml(importstr '../alerts/vllm-recording.yml'),
  'slo-rules.yml': std.parseYaml(importstr '../alerts/slo-rules.yml'),
};

local dashboards = {
  'vllm-gpu.json': import '../dashboards/vllm-gpu.json',
  'vllm-overview.json': import '../dashboards/vllm-overview.json',
  'vllm-probes.json': import '../dashboards/vllm-probes.json',
  'vllm-slos.json': import '../dashboards/vllm-slos.json',
};

{
  _config+:: {
    // Label matchers added to every raw series the rules read, e.g.
    // 'job="vllm-exporter"' or 'namespace=~"inference-.*"'. Empty: the
    // rules as shipped, which read every vllm_* series in the Prometheus.
    vllmSelector: '',
    // Include the SLO rules generated from the shipped default SLOs
    // (alerts/slo-rules.yml); turn off when you generate your own with
    // `vllm_exporter rules --config.file=...`.
    sloRules: true,
  },

  local config = self._config,
  local files = [
    ruleFiles[f]
    for f in std.objectFields(ruleFiles)
    if config.sloRules || f != 'slo-rules.yml'
  ],
  // The groups of every file, keeping the rules that have field kind
  // ('alert' or 'record'), with the selector applied; empty groups dropped.
  local groups(kind) = [
    g { rules: [r { expr: promql.withSelector(r.expr, config.vllmSelector) } for r in g.rules if std.objectHas(r, kind)] }
    for f in files
    for g in f.groups
    if std.length([r for r in g.rules if std.objectHas(r, kind)]) > 0
  ],

  prometheusAlerts+:: { groups+: groups('alert') },
  prometheusRules+:: { groups+: groups('record') },
  grafanaDashboards+:: dashboards,
}
