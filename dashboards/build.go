// Package dashboards builds the Grafana dashboards shipped in this directory
// (vllm-*.json) from compact panel lists, so every panel gets the same
// datasource, variables and layout rules. The JSON files are the product;
// `go test ./dashboards -update` rewrites them from this code and the test
// fails when they drift.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/histq"
)

// ds is the datasource reference every panel and target uses: the
// dashboard's `datasource` variable, never a fixed uid.
var ds = map[string]string{"type": "prometheus", "uid": "${datasource}"}

// Filters used in queries.
const (
	inst = `instance=~"$instance"`
	mdl  = `model=~"$model"`
	mi   = mdl + "," + inst
	// sloModel keeps the SLOs of the selected models and the probe SLOs,
	// which belong to no model (model="").
	sloModel = `model=~"$model|"`
	ri       = "[$__rate_interval]"
	width    = 24
)

// target is one PromQL query of a panel.
type target struct {
	Expr   string
	Legend string
}

// panel is one panel spec. W defaults to 12, H to 8.
type panel struct {
	Title   string
	Type    string // timeseries, stat, table, bargauge, gauge, state-timeline
	Unit    string
	Desc    string
	Targets []target
	W, H    int
	Max     *float64
	Stack   bool
	// NoValue is what the panel says instead of "No data": why it can be
	// empty and what to do about it (a missing flag, nothing failed yet).
	NoValue string
}

type row struct {
	Title  string
	Panels []panel
}

// variable is a query variable listing the values of LabelName on
// Metric (label_values); with Query set, the instances the PromQL Query
// returns (query_result, the instance taken from each result line), and
// "All" is the pods listed rather than every pod.
type variable struct {
	Name, Label, Metric, LabelName string
	Query                          string
}

// instanceRegex takes the instance out of a query_result line
// ({instance="d:9470"} 1 1700000000000).
const instanceRegex = `/instance="([^"]+)"/`

type dashboard struct {
	File, UID, Title, Desc string
	Vars                   []variable // after datasource
	Rows                   []row
}

func one() *float64 { v := 1.0; return &v }

func q(expr, legend string) target { return target{Expr: expr, Legend: legend} }

// hq is histogram_quantile over a histogram summed by the given labels,
// reading the classic buckets or the native histogram (package histq).
func hq(quantile, metric, filter string, by ...string) string {
	return histq.H{Name: metric, Matchers: filter, Window: ri[1 : len(ri)-1]}.Quantile(quantile, by...).String()
}

func (p panel) json(id, x, y int) map[string]any {
	w, h := p.W, p.H
	if w == 0 {
		w = 12
	}
	if h == 0 {
		h = 8
	}
	defaults := map[string]any{"unit": p.Unit}
	if p.Unit == "" {
		defaults["unit"] = "short"
	}
	if p.Max != nil {
		defaults["min"] = 0
		defaults["max"] = *p.Max
	}
	custom := map[string]any{}
	options := map[string]any{}
	switch p.Type {
	case "timeseries":
		custom = map[string]any{"drawStyle": "line", "lineWidth": 1, "fillOpacity": 10, "showPoints": "never", "spanNulls": false}
		if p.Stack {
			custom["stacking"] = map[string]any{"mode": "normal", "group": "A"}
		}
		options = map[string]any{
			"legend":  map[string]any{"displayMode": "table", "placement": "bottom", "showLegend": true, "calcs": []string{"lastNotNull", "max"}},
			"tooltip": map[string]any{"mode": "multi", "sort": "desc"},
		}
	case "stat":
		options = map[string]any{"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"colorMode": "value", "graphMode": "area", "textMode": "auto", "orientation": "auto", "justifyMode": "auto"}
	case "state-timeline":
		custom = map[string]any{"lineWidth": 0, "fillOpacity": 80}
		options = map[string]any{"showValue": "never", "mergeValues": true, "rowHeight": 0.9,
			"legend": map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true}}
		defaults["mappings"] = []any{map[string]any{"type": "value", "options": map[string]any{
			"0": map[string]any{"text": "ok", "color": "green", "index": 0},
			"1": map[string]any{"text": "firing", "color": "red", "index": 1}}}}
	case "table":
		options = map[string]any{"showHeader": true, "cellHeight": "sm"}
	case "bargauge", "gauge":
		options = map[string]any{"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
			"orientation": "horizontal", "showThresholdLabels": false, "showThresholdMarkers": true}
	}
	if p.NoValue != "" {
		defaults["noValue"] = p.NoValue
	}
	defaults["custom"] = custom
	defaults["thresholds"] = map[string]any{"mode": "absolute", "steps": []any{map[string]any{"color": "green", "value": nil}}}
	var targets []any
	for i, t := range p.Targets {
		tj := map[string]any{
			"datasource": ds, "expr": t.Expr, "legendFormat": t.Legend,
			"refId": string(rune('A' + i)), "range": true, "instant": false, "editorMode": "code",
		}
		if p.Type == "table" {
			tj["range"], tj["instant"], tj["format"] = false, true, "table"
		}
		targets = append(targets, tj)
	}
	return map[string]any{
		"id": id, "type": p.Type, "title": p.Title, "description": p.Desc, "datasource": ds,
		"gridPos":     map[string]int{"h": h, "w": w, "x": x, "y": y},
		"fieldConfig": map[string]any{"defaults": defaults, "overrides": []any{}},
		"options":     options, "targets": targets,
	}
}

func (v variable) json() map[string]any {
	query := fmt.Sprintf("label_values(%s, %s)", v.Metric, v.LabelName)
	editor := map[string]any{"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 1}
	var allValue any = ".*"
	regex := ""
	if v.Query != "" {
		query = "query_result(" + v.Query + ")"
		// qryType 3: Grafana's "Query result" editor, varQuery its PromQL.
		editor = map[string]any{"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery", "qryType": 3, "varQuery": v.Query}
		allValue, regex = nil, instanceRegex
	}
	return map[string]any{
		"name": v.Name, "label": v.Label, "type": "query", "datasource": ds,
		"definition": query,
		"query":      editor,
		"includeAll": true, "multi": true, "allValue": allValue, "refresh": 2, "sort": 1, "regex": regex,
		"current": map[string]any{"selected": true, "text": []string{"All"}, "value": []string{"$__all"}},
		"hide":    0, "options": []any{}, "skipUrlSync": false,
	}
}

// JSON renders the dashboard with stable key order and indentation.
func (d dashboard) JSON() ([]byte, error) {
	vars := []any{map[string]any{
		"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
		"current": map[string]any{}, "hide": 0, "refresh": 1, "regex": "", "options": []any{},
		"includeAll": false, "multi": false, "skipUrlSync": false,
	}}
	for _, v := range d.Vars {
		vars = append(vars, v.json())
	}
	var panels []any
	id, y := 1, 0
	for _, r := range d.Rows {
		panels = append(panels, map[string]any{"id": id, "type": "row", "title": r.Title, "collapsed": false,
			"gridPos": map[string]int{"h": 1, "w": width, "x": 0, "y": y}, "panels": []any{}})
		id++
		y++
		x, rowH := 0, 0
		for _, p := range r.Panels {
			w, h := p.W, p.H
			if w == 0 {
				w = 12
			}
			if h == 0 {
				h = 8
			}
			if x+w > width {
				x, y, rowH = 0, y+rowH, 0
			}
			panels = append(panels, p.json(id, x, y))
			id++
			x += w
			if h > rowH {
				rowH = h
			}
		}
		y += rowH
	}
	out := map[string]any{
		"annotations": map[string]any{"list": []any{map[string]any{
			"builtIn": 1, "datasource": map[string]string{"type": "grafana", "uid": "-- Grafana --"},
			"enable": true, "hide": true, "iconColor": "rgba(0, 211, 255, 1)", "name": "Annotations & Alerts", "type": "dashboard",
		}}},
		"description": d.Desc, "editable": true, "fiscalYearStartMonth": 0, "graphTooltip": 1, "id": nil,
		"links":  []any{map[string]any{"title": "vLLM dashboards", "type": "dashboards", "tags": []string{"vllm"}, "asDropdown": true, "includeVars": true, "keepTime": true}},
		"panels": panels, "refresh": "30s", "schemaVersion": 39, "tags": []string{"vllm", "vllm_exporter"},
		"templating": map[string]any{"list": vars},
		"time":       map[string]string{"from": "now-3h", "to": "now"},
		"timepicker": map[string]any{}, "timezone": "", "title": d.Title, "uid": d.UID, "version": 1, "weekStart": "",
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Files renders every dashboard: file name -> JSON.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{}
	for _, d := range all() {
		b, err := d.JSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", d.File, err)
		}
		if !strings.HasSuffix(d.File, ".json") {
			return nil, fmt.Errorf("%s: not a .json name", d.File)
		}
		out[d.File] = b
	}
	return out, nil
}
