// withSelector(expr, selector) adds label matchers (e.g. 'job="vllm"') to
// every vector selector of a raw series in a PromQL expression: names
// without a colon. Recorded series (model:vllm_...:rate5m, slo:...) are left
// alone: they keep the labels of the raw series they were recorded from, so
// selecting those is enough. Strings, durations, label lists of by/on/...
// and existing matchers are copied unchanged; an empty selector returns the
// expression as it is.
local isDigit(c) = c >= '0' && c <= '9';
local isIdentStart(c) = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':';
local isIdent(c) = isIdentStart(c) || isDigit(c);
local isSpace(c) = c == ' ' || c == '\n' || c == '\t' || c == '\r';

// Words that are not metric names when no '(' follows them: operators,
// modifiers, and aggregations written as `sum by (l) (...)`.
local keywords = std.set([
  'and', 'or', 'unless', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right',
  'offset', 'bool', 'atan2', 'inf', 'nan',
  'sum', 'avg', 'min', 'max', 'count', 'group', 'stddev', 'stdvar', 'topk', 'bottomk',
  'quantile', 'count_values', 'limitk', 'limit_ratio',
]);
// Words followed by a parenthesised list of label names.
local labelLists = std.set(['by', 'without', 'on', 'ignoring', 'group_left', 'group_right']);

// The index of the first character at or after i that fails pred.
local scan(s, i, pred) =
  if i < std.length(s) && pred(s[i]) then scan(s, i + 1, pred) tailstrict else i;

// The index just past the closing quote q of a string starting before i.
local stringEnd(s, i, q) =
  if i >= std.length(s) then error 'unterminated string in: ' + s
  else if s[i] == '\\' then stringEnd(s, i + 2, q) tailstrict
  else if s[i] == q then i + 1
  else stringEnd(s, i + 1, q) tailstrict;

// The index just past the closing character of a block starting before i,
// skipping quoted strings ({...} matchers, [...] ranges, (...) label lists).
local blockEnd(s, i, close) =
  if i >= std.length(s) then error 'unbalanced ' + close + ' in: ' + s
  else if s[i] == close then i + 1
  else if s[i] == '"' || s[i] == "'" || s[i] == '`' then blockEnd(s, stringEnd(s, i + 1, s[i]), close) tailstrict
  else blockEnd(s, i + 1, close) tailstrict;

local addMatchers(body, sel) =
  local b = std.rstripChars(body, ' \n\t');
  if b == '' then sel
  else if std.endsWith(b, ',') then b + sel
  else b + ',' + sel;

{
  withSelector(expr, sel)::
    local s = expr;
    local n = std.length(s);
    local raw(name) = std.length(std.findSubstr(':', name)) == 0;
    local step(i, acc) =
      if i >= n then std.join('', acc)
      else
        local c = s[i];
        if c == '"' || c == "'" || c == '`' then
          local j = stringEnd(s, i + 1, c);
          step(j, acc + [s[i:j]]) tailstrict
        else if c == '[' || c == '{' then
          local j = blockEnd(s, i + 1, if c == '[' then ']' else '}');
          step(j, acc + [s[i:j]]) tailstrict
        else if isDigit(c) || c == '.' then
          local j = scan(s, i, function(x) isIdent(x) || x == '.');
          step(j, acc + [s[i:j]]) tailstrict
        else if isIdentStart(c) then
          local j = scan(s, i, isIdent);
          local name = s[i:j];
          local k = scan(s, j, isSpace);
          local next = if k < n then s[k] else '';
          if std.setMember(name, labelLists) && next == '(' then
            local e = blockEnd(s, k + 1, ')');
            step(e, acc + [s[i:e]]) tailstrict
          else if next == '(' || std.setMember(name, keywords) || !raw(name) then
            step(j, acc + [name]) tailstrict
          else if next == '{' then
            local e = blockEnd(s, k + 1, '}');
            step(e, acc + [name + s[j:k] + '{' + addMatchers(s[k + 1:e - 1], sel) + '}']) tailstrict
          else
            step(j, acc + [name + '{' + sel + '}']) tailstrict
        else
          step(i + 1, acc + [c]) tailstrict;
    if sel == '' then expr else step(0, []),
}
