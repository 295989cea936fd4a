// Package e2e proves the rules and dashboards against the real programs:
// which metric names the PromQL in alerts/ and dashboards/ uses (a small
// tokenizer, since the module does not depend on Prometheus' parser), and
// end-to-end tests that run the simulated vLLM, the exporter, Prometheus and
// Alertmanager.
package e2e

import (
	"fmt"
	"regexp"
	"strings"
)

// Selector is one vector selector found in an expression.
type Selector struct {
	// Name is the metric name ("" when only __name__ matchers are used).
	Name string
	// NameRegex is the value of a __name__=~"..." matcher, if any.
	NameRegex string
	// Labels are the label names matched inside {...} (except __name__).
	Labels []string
}

// keywords are PromQL words that are not metric names when not followed by
// "(": binary operators, modifiers and the like.
var keywords = map[string]bool{
	"and": true, "or": true, "unless": true, "by": true, "without": true, "on": true,
	"ignoring": true, "group_left": true, "group_right": true, "offset": true, "bool": true,
	"atan2": true, "inf": true, "nan": true, "start": true, "end": true,
}

// labelListKeywords are followed by a parenthesised list of label names.
var labelListKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
}

// aggregations may carry a by/without clause before their argument list.
var aggregations = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "group": true,
	"stddev": true, "stdvar": true, "topk": true, "bottomk": true, "quantile": true,
	"count_values": true, "limitk": true, "limit_ratio": true,
}

type token struct {
	kind byte // 'i' ident, 's' string, 'n' number/duration, 'p' punctuation/operator
	text string
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentChar(c byte) bool { return isIdentStart(c) || (c >= '0' && c <= '9') }

func tokenize(expr string) ([]token, error) {
	var toks []token
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			var sb strings.Builder
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' && j+1 < len(expr) {
					j++
					switch expr[j] {
					case 'n':
						sb.WriteByte('\n')
					case 't':
						sb.WriteByte('\t')
					default:
						sb.WriteByte(expr[j])
					}
					continue
				}
				sb.WriteByte(expr[j])
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			toks = append(toks, token{'s', sb.String()})
			i = j + 1
		case c >= '0' && c <= '9' || (c == '.' && i+1 < len(expr) && expr[i+1] >= '0' && expr[i+1] <= '9'):
			// numbers, hex, exponents and durations (5m, 1h30m, 1e-9)
			j := i
			for j < len(expr) && (isIdentChar(expr[j]) || expr[j] == '.' ||
				((expr[j] == '-' || expr[j] == '+') && (expr[j-1] == 'e' || expr[j-1] == 'E') && !strings.ContainsAny(expr[i:j], "xX"))) {
				j++
			}
			toks = append(toks, token{'n', expr[i:j]})
			i = j
		case isIdentStart(c):
			j := i
			for j < len(expr) && isIdentChar(expr[j]) {
				j++
			}
			toks = append(toks, token{'i', expr[i:j]})
			i = j
		default:
			// multi-char operators matter only as separators here
			for _, op := range []string{"=~", "!~", "!=", "==", ">=", "<=", "@"} {
				if strings.HasPrefix(expr[i:], op) {
					toks = append(toks, token{'p', op})
					i += len(op)
					goto next
				}
			}
			toks = append(toks, token{'p', string(c)})
			i++
		next:
		}
	}
	return toks, nil
}

// Selectors returns every vector selector of a PromQL expression: metric
// names (identifiers that are not functions, keywords, label names,
// durations or string contents) with the label names they match on.
// Grafana variables must be substituted before ($__rate_interval -> 5m).
func Selectors(expr string) ([]Selector, error) {
	toks, err := tokenize(expr)
	if err != nil {
		return nil, err
	}
	var out []Selector
	depthBracket := 0
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind == 'p' && t.text == "[" {
			depthBracket++
			continue
		}
		if t.kind == 'p' && t.text == "]" {
			depthBracket--
			continue
		}
		if depthBracket > 0 {
			continue // range / subquery durations
		}
		if t.kind == 'p' && t.text == "{" {
			// a selector without a metric name: {__name__=~"..."}
			sel, end, err := matchers(toks, i)
			if err != nil {
				return nil, err
			}
			out = append(out, sel)
			i = end
			continue
		}
		if t.kind != 'i' {
			continue
		}
		nextIs := func(s string) bool { return i+1 < len(toks) && toks[i+1].kind == 'p' && toks[i+1].text == s }
		if labelListKeywords[t.text] && nextIs("(") {
			j := i + 2
			for j < len(toks) && !(toks[j].kind == 'p' && toks[j].text == ")") {
				j++
			}
			i = j
			continue
		}
		if keywords[t.text] {
			continue
		}
		if nextIs("(") || (aggregations[t.text] && i+1 < len(toks) && toks[i+1].kind == 'i' &&
			(toks[i+1].text == "by" || toks[i+1].text == "without")) {
			continue // function call or aggregation
		}
		sel := Selector{Name: t.text}
		if nextIs("{") {
			m, end, err := matchers(toks, i+1)
			if err != nil {
				return nil, err
			}
			sel.Labels, sel.NameRegex = m.Labels, m.NameRegex
			i = end
		}
		out = append(out, sel)
	}
	if depthBracket != 0 {
		return nil, fmt.Errorf("unbalanced [ ] in %q", expr)
	}
	return out, nil
}

// matchers parses {l op "v", ...} starting at the "{" token at i; it returns
// the selector (labels, __name__ regex or name) and the index of "}".
func matchers(toks []token, i int) (Selector, int, error) {
	var sel Selector
	j := i + 1
	for ; j < len(toks); j++ {
		t := toks[j]
		if t.kind == 'p' && t.text == "}" {
			return sel, j, nil
		}
		if t.kind == 'p' && t.text == "," {
			continue
		}
		if t.kind != 'i' || j+2 >= len(toks) || toks[j+1].kind != 'p' || toks[j+2].kind != 's' {
			return sel, j, fmt.Errorf("bad label matcher near %q", t.text)
		}
		op, val := toks[j+1].text, toks[j+2].text
		switch {
		case t.text == "__name__" && op == "=":
			sel.Name = val
		case t.text == "__name__" && op == "=~":
			sel.NameRegex = val
		case t.text == "__name__":
			// negative name matchers select nothing specific
		default:
			sel.Labels = append(sel.Labels, t.text)
		}
		j += 2
	}
	return sel, j, fmt.Errorf("unterminated {")
}

// grafanaVars maps Grafana's built-in interval variables to durations so
// dashboard queries become plain PromQL.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "1m", "${__rate_interval}", "1m",
	"$__interval", "1m", "${__interval}", "1m",
	"$__range", "5m", "${__range}", "5m",
)

var templateVar = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

// Substitute turns a dashboard query into PromQL: interval variables become
// durations, every other template variable (model, instance, ...) becomes
// ".*" (the dashboards' "All" value).
func Substitute(expr string) string {
	expr = grafanaVars.Replace(expr)
	return templateVar.ReplaceAllString(expr, ".*")
}

var (
	labelValues = regexp.MustCompile(`^\s*label_values\(\s*(.+?)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)
	queryResult = regexp.MustCompile(`^\s*query_result\((.+)\)\s*$`)
)

// VariableExpr returns the PromQL a Grafana variable query evaluates, its
// template variables still in: `label_values(sel, label)` lists the label's
// values on sel (count by (label) (sel)), `query_result(expr)` the result
// of expr (the dashboard's regex picks each value from a result line).
// Each series of the result is one value: none, an empty variable.
func VariableExpr(q string) (string, error) {
	if m := labelValues.FindStringSubmatch(q); m != nil {
		sel, has := m[1], m[2]+`!=""`
		if strings.HasSuffix(sel, "}") {
			sel = strings.TrimSuffix(strings.TrimSuffix(sel, "}"), ",") + "," + has + "}"
			sel = strings.Replace(sel, "{,", "{", 1)
		} else {
			sel += "{" + has + "}"
		}
		return fmt.Sprintf("count by (%s) (%s)", m[2], sel), nil
	}
	if m := queryResult.FindStringSubmatch(q); m != nil {
		return m[1], nil
	}
	return "", fmt.Errorf("unsupported variable query %q (want label_values(metric, label) or query_result(expr))", q)
}
