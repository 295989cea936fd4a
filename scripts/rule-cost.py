#!/usr/bin/env python3
"""What the shipped rules cost Prometheus on a fleet: each group's
evaluation time beside its interval, and the samples its rules touch.

usage: scripts/rule-cost.py [--pods N[,N...]] [--days D] [--models M]
                            [--interval S] [--evals E] [NAME=RULES ...]

RULES is a directory of rule files or @REV (alerts/*.yml at git revision
REV); the default is shipped=alerts. Several rule sets are measured side
by side on the same data. For each fleet size it

1. backfills N pods x D days of the series the rules read over long
   windows (promtool tsdb create-blocks-from openmetrics; 18h blocks, as a
   Prometheus with the default retention keeps them), the TPOT buckets
   over the last day, and the last 16 minutes of every series the rules
   read (all latency buckets, GPU, probe and exporter series);
2. per rule set, backfills the recorded series its rules read over more
   than 5 minutes (create-blocks-from rules against a Prometheus serving
   the raw blocks, level by level where one record reads another), so the
   long windows read a full history, not empty inputs;
3. starts Prometheus 3.16 (internal/tools, built into the tool cache) on
   those blocks with the rule set, scraping the fleet's current values
   from this script (honor_labels) every interval/2, evaluating every
   group every interval (a 5m group too: the table weighs it by its own
   interval); waits for E (3) evaluations of every group after its first,
   cold one and reports their median (/api/v1/rules evaluationTime), and
   the rules that failed to evaluate, if any;
4. restarts it without evaluation on the same data and runs every rule's
   expression at its group's last evaluation time with stats=all, one at
   a time, twice: the samples touched (totalQueryableSamples) and
   Prometheus' CPU time (schedstat) of the second pass are summed per
   group. The CPU time depends less on what else the machine runs than
   the evaluation time does.

Each pod serves one of M models (default 4) at about 5 requests/s;
counters grow linearly (the rules' cost depends on samples, not values).
Needs python3 with PyYAML, go (to build the pinned Prometheus) and ~10 GB
of free disk per 100M samples in flight under $TMPDIR. Not run in CI: it
prints the table of docs/cost.md (rule evaluation).
"""

import argparse
import concurrent.futures
import http.server
import json
import math
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

import yaml

SCRAPE = 15  # seconds between samples, as the shipped scrape interval
BLOCK = 18 * 3600  # backfilled block span: a compaction range (2h x 3^2)
LIVE = 16 * 60  # every series exists for this long before the measurement
DAY = 86400
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TOKEN = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]
REQUEST = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]
# The SLO thresholds of the shipped defaults: their buckets are kept the
# whole history.
THRESHOLD = {"vllm_time_to_first_token_seconds": 1.0, "vllm_request_time_per_output_token_seconds": 0.1,
             "vllm_inter_token_latency_seconds": 0.1, "vllm_e2e_request_latency_seconds": 60.0}


def le(v):
    return "+Inf" if v == math.inf else repr(float(v))


def fleet(pods, models):
    """Every series of the fleet: (scope, name, labels, per-second slope,
    offset). Scope "hist": the whole history; "day": the last day; "live":
    the last LIVE seconds and the scrape."""
    out = []
    for p in range(pods):
        inst = 'job="vllm",instance="pod-%05d:9470"' % p
        pm = inst + ',model="m%d"' % (p % models)
        r = 5.0 * (0.8 + 0.4 * ((p * 7919) % 101) / 100)  # requests/s
        add = lambda scope, name, labels, slope, off=0.0: out.append((scope, name, labels, slope, off))
        for reason, share in (("stop", 0.8), ("length", 0.188), ("abort", 0.006), ("error", 0.004), ("repetition", 0.002)):
            add("hist", "vllm_requests_finished_total", pm + ',finished_reason="%s"' % reason, r * share)
        add("hist", "vllm_preemptions_total", pm, r * 0.005)
        add("hist", "vllm_requests_refused_total", pm, r * 0.001)
        add("hist", "vllm_generation_tokens_total", pm, r * 200)
        add("hist", "vllm_prompt_tokens_total", pm, r * 800)
        add("hist", "vllm_prefix_cache_queries_total", pm, r * 800)
        add("hist", "vllm_prefix_cache_hits_total", pm, r * 400)
        for name, v in (("vllm_requests_running", 20), ("vllm_requests_waiting", 1), ("vllm_kv_cache_usage_ratio", 0.5), ("vllm_engine_awake", 1)):
            add("hist", name, pm, 0.0, v)
        add("hist", "vllm_pod_role_info", pm + ',role="both",source="default"', 0.0, 1)
        add("hist", "vllm_engine_stalled", inst, 0.0, 0)
        for name, bounds, per_req, cdf in (
                ("vllm_time_to_first_token_seconds", TTFT, 1, lambda b: min(1, 0.2 + b)),
                ("vllm_request_time_per_output_token_seconds", TOKEN, 1, lambda b: min(1, 0.5 + 5 * b)),
                ("vllm_inter_token_latency_seconds", TOKEN, 200, lambda b: min(1, 0.6 + 4 * b)),
                ("vllm_e2e_request_latency_seconds", REQUEST, 1, lambda b: min(1, b / 30)),
                ("vllm_request_queue_time_seconds", REQUEST, 1, lambda b: min(1, 0.9 + b / 100)),
                ("vllm_request_prefill_time_seconds", REQUEST, 1, lambda b: min(1, 0.7 + b / 10)),
                ("vllm_request_decode_time_seconds", REQUEST, 1, lambda b: min(1, b / 30))):
            n = r * per_req
            for b in bounds + [math.inf]:
                if b == THRESHOLD.get(name):
                    scope = "hist"
                elif name == "vllm_request_time_per_output_token_seconds":
                    scope = "day"  # the throttling ticket's 1d baseline
                else:
                    scope = "live"
                add(scope, name + "_bucket", pm + ',le="%s"' % le(b), n * (1 if b == math.inf else cdf(b)))
            add("hist" if name in THRESHOLD else "live", name + "_count", pm, n)
            add("live", name + "_sum", pm, n * 0.05)
        for reason in ("gpu_idle", "sw_power_cap", "hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown"):
            add("live", "vllm_gpu_clock_event_active", inst + ',gpu="0",uuid="GPU-%05d",reason="%s"' % (p, reason), 0.0, 0)
        add("live", "vllm_gpu_xid_events_total", inst + ',gpu="0",uuid="GPU-%05d",xid="13"' % p, 0.0, 0)
        add("live", "vllm_probe_requests_total", inst + ',profile="short"', 1 / 15)
        add("live", "vllm_probe_failures_total", inst + ',profile="short",reason="timeout"', 0.0, 0)
        add("live", "vllm_bottleneck", pm + ',class="deferred_livelock"', 0.0, 0)
        add("live", "vllm_up", inst, 0.0, 1)
        add("live", "vllm_exporter_build_info", inst + ',version="0.1.0"', 0.0, 1)
        add("live", "vllm_exporter_start_time_seconds", inst, 0.0, 1.7e9)
        add("live", "vllm_exporter_last_successful_scrape_timestamp_seconds", inst, 0.0, 1.7e9)
        add("live", "vllm_exporter_scrapes_total", inst, 0.2)
        add("live", "vllm_exporter_scrape_errors_total", inst + ',reason="timeout"', 0.0, 0)
        add("live", "vllm_exporter_config_last_reload_successful", inst, 0.0, 1)
        add("live", "vllm_exporter_collector_up", inst + ',collector="vllm"', 0.0, 1)
        add("live", "vllm_exporter_expected_metric_missing", inst + ',metric="vllm:num_requests_running"', 0.0, 0)
    out.sort(key=lambda s: s[1])  # one family's series together
    return out


def value(s, t):
    """s's value t seconds after the origin: a counter grows by its slope
    at every SCRAPE, in whole thousandths, and is written as an integer."""
    return str(round(s[3] * SCRAPE * 1000) * (t // SCRAPE) // 1000) if s[3] else repr(s[4])


def write_openmetrics(path, series, scopes, origin, start, end):
    """OpenMetrics text of the samples every SCRAPE in [start, end) of the
    series whose scope scopes maps to a start time (absolute seconds)."""
    with open(path, "w") as f:
        for s in series:
            a = scopes.get(s[0])
            if a is None:
                continue
            first = -(-max(start, a) // SCRAPE) * SCRAPE
            ts = [" %d\n" % t for t in range(first, end, SCRAPE)]
            prefix = "%s{%s} " % (s[1], s[2])
            if s[3]:
                k, m = (first - origin) // SCRAPE, round(s[3] * SCRAPE * 1000)
                f.write("".join([prefix + str(x // 1000) + t for x, t in zip(range(m * k, m * (k + len(ts)), m), ts)]))
            else:
                v = prefix + value(s, 0)
                f.write("".join([v + t for t in ts]))
        f.write("# EOF\n")


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:], r.stderr[-3000:]))
    return r.stdout


def tools():
    out = run(["go", "run", "./internal/toolbuild/buildtools", "prometheus-3.16"], cwd=ROOT)
    for line in out.splitlines():
        m = re.match(r"buildtools: prometheus-3.16\s+\d+s\s+(\S+)", line)
        if m:
            return os.path.join(m.group(1), "prometheus"), os.path.join(m.group(1), "promtool")
    sys.exit("buildtools printed no prometheus-3.16 directory:\n" + out)


def backfill_raw(promtool, series, scopes, origin, start, end, out, work):
    """create-blocks-from openmetrics over [start, end), one BLOCK-aligned
    file at a time (promtool reads its whole input once per block), the
    next written while promtool reads the last."""
    with concurrent.futures.ThreadPoolExecutor(1) as ingest:
        pending, t = None, start // BLOCK * BLOCK
        while t < end:
            path = os.path.join(work, "chunk-%d.om" % t)
            write_openmetrics(path, series, scopes, origin, max(t, start), min(t + BLOCK, end))
            if pending:
                pending.result()
            pending = ingest.submit(ingest_chunk, promtool, path, out)
            t += BLOCK
        if pending:
            pending.result()


def ingest_chunk(promtool, path, out):
    run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--max-block-duration=%ds" % BLOCK, "--quiet", path, out])
    os.remove(path)


def link_blocks(dirs, dest):
    """A data directory holding hard links of the blocks in dirs
    (blocks are immutable; Prometheus only deletes its own links)."""
    os.makedirs(dest)
    for d in dirs:
        for b in os.listdir(d):
            if os.path.isdir(os.path.join(d, b)) and re.fullmatch(r"[0-9A-Z]{26}", b):
                shutil.copytree(os.path.join(d, b), os.path.join(dest, b), copy_function=os.link)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, binary, data, rules, work, scrape=None, interval=30, evaluate=True):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        conf = {"global": {"scrape_interval": "%ds" % max(1, interval // 2), "evaluation_interval": "%ds" % interval if evaluate else "1y"},
                "rule_files": rules}
        if scrape:
            conf["scrape_configs"] = [{"job_name": "fleet", "honor_labels": True, "scrape_timeout": "%ds" % max(1, interval // 2 - 1),
                                       "static_configs": [{"targets": [scrape]}]}]
        cfg = os.path.join(work, "prometheus-%d.yml" % self.port)
        with open(cfg, "w") as f:
            yaml.safe_dump(conf, f)
        self.log = open(os.path.join(work, "prometheus-%d.log" % self.port), "w")
        self.proc = subprocess.Popen([binary, "--config.file=" + cfg, "--storage.tsdb.path=" + data, "--web.listen-address=127.0.0.1:%d" % self.port,
                                      "--storage.tsdb.retention.time=100d", "--no-storage.tsdb.allow-overlapping-compaction",
                                      # no compaction while measuring: a single 2h range
                                      "--storage.tsdb.min-block-duration=2h", "--storage.tsdb.max-block-duration=2h",
                                      "--query.timeout=10m"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(1200):
            if self.proc.poll() is not None:
                sys.exit("prometheus exited:\n" + open(self.log.name).read()[-3000:])
            try:
                urllib.request.urlopen(self.url + "/-/ready", timeout=2)
                return
            except OSError:
                time.sleep(0.5)
        sys.exit("prometheus never became ready:\n" + open(self.log.name).read()[-3000:])

    def api(self, path, **params):
        q = urllib.parse.urlencode(params)
        with urllib.request.urlopen(self.url + path + ("?" + q if q else ""), timeout=900) as r:
            return json.load(r)["data"]

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(300)
        self.log.close()


def without_intervals(files, work, tag):
    """Copies of rule files with no group interval: with a 1y evaluation
    interval Prometheus then serves queries and evaluates nothing."""
    out = []
    for p in files:
        doc = yaml.safe_load(open(p))
        for g in doc.get("groups") or []:
            g.pop("interval", None)
        q = os.path.join(work, "%s-%s" % (tag, os.path.basename(p)))
        with open(q, "w") as f:
            yaml.safe_dump(doc, f)
        out.append(q)
    return out


DURATION = re.compile(r"(\d+)(ms|y|w|d|h|m|s)")
UNIT = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": DAY, "w": 7 * DAY, "y": 365 * DAY}


def seconds(d):
    return sum(int(n) * UNIT[u] for n, u in DURATION.findall(d))


def reads(expr, names):
    """The recorded series expr reads: name -> the longest range (seconds;
    0 for an instant read)."""
    out = {}
    for m in re.finditer(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{[^}]*\})?\s*(\[([^\]:]+)(:[^\]]*)?\])?", expr):
        n = m.group(1)
        if n in names:
            out[n] = max(out.get(n, 0), seconds(m.group(4)) if m.group(4) else 0)
    return out


def backfill_recorded(prom, promtool, files, history, end, base, work, tag):
    """Backfills the recorded series the rules read over more than 5
    minutes (and what those read), over as much history as is read; a
    record reading another is backfilled after it, from a Prometheus that
    serves the first. Returns the block directories."""
    rules, interval = {}, {}
    for p in files:
        for g in (yaml.safe_load(open(p)).get("groups") or []):
            for r in g["rules"]:
                key = r.get("record") or "alert:" + r["alert"]
                rules.setdefault(key, []).append((r, g.get("interval", "30s")))
    names = {k for k in rules if not k.startswith("alert:")}
    need = {}

    def want(name, span):
        span = min(span, history)
        if need.get(name, -1) >= span:
            return
        need[name] = span
        for r, _ in rules[name]:
            for n, w in reads(r["expr"], names).items():
                want(n, span + w)

    for key, rs in rules.items():
        for r, _ in rs:
            for n, w in reads(r["expr"], names).items():
                if w > 300:
                    want(n, w)
    level = {}

    def lvl(n):
        if n not in level:
            level[n] = 1 + max([lvl(m) for r, _ in rules[n] for m in reads(r["expr"], names) if m in need] or [-1])
        return level[n]

    for n in need:
        lvl(n)
    dirs, data, server = [], None, None
    for k in sorted(set(level.values())):
        data = os.path.join(work, "%s-source-%d" % (tag, k))
        link_blocks([base] + dirs, data)
        server = Prometheus(prom, data, [], work, evaluate=False)
        out = os.path.join(work, "%s-recorded-%d" % (tag, k))
        os.makedirs(out)
        batches = {}
        for n in (n for n in need if level[n] == k):
            for r, iv in rules[n]:
                batches.setdefault((need[n], iv), []).append(r)
        t0 = time.time()
        for (span, iv), rs in batches.items():
            f = os.path.join(work, "%s-backfill-%d-%d-%s.yml" % (tag, k, span, iv))
            with open(f, "w") as fh:
                yaml.safe_dump({"groups": [{"name": "backfill", "interval": iv, "rules": rs}]}, fh)
            run([promtool, "tsdb", "create-blocks-from", "rules", "--max-block-duration=%ds" % BLOCK, "--url=" + server.url, "--start=%d" % (end - span), "--end=%d" % end,
                 "--output-dir=" + out, f])
        server.stop()
        shutil.rmtree(data)
        print("  %s: backfilled level %d (%s) in %.0fs" % (tag, k, ", ".join(sorted(n for n in need if level[n] == k)), time.time() - t0), flush=True)
        dirs.append(out)
    return dirs


class Live(http.server.BaseHTTPRequestHandler):
    series = []
    origin = 0

    def do_GET(self):
        t = int(time.time()) - self.origin
        body = "".join("%s{%s} %s\n" % (s[1], s[2], value(s, t)) for s in self.series).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


def cpu_ns(pid):
    """CPU time of a process's live threads (schedstat), nanoseconds."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        try:
            total += int(open("/proc/%d/task/%s/schedstat" % (pid, t)).read().split()[0])
        except OSError:
            pass
    return total


def measure(prom, files, data, scrape, interval, evals, work, tag, deadline):
    """Per group (file name, group name): its interval, its evaluation
    times by evaluation, and, with every rule run again one at a time at
    the group's last evaluation, the samples it touches and the CPU time
    Prometheus spends on it (the second of two passes); also Prometheus'
    CPU seconds per evaluation interval while it evaluated warm."""
    # Every group evaluated every interval: its cost per evaluation does
    # not depend on how often it runs, and a 5m group needs no 10 minutes.
    own = {(os.path.basename(p), g["name"]): seconds(g.get("interval", "%ds" % interval)) for p in files for g in yaml.safe_load(open(p))["groups"]}
    m = Prometheus(prom, data, without_intervals(files, work, tag), work, scrape=scrape, interval=interval)
    seen, warm = {}, None
    try:
        while time.time() < deadline:
            for g in m.api("/api/v1/rules")["groups"]:
                k = (os.path.basename(g["file"])[len(tag) + 1:], g["name"])
                ev = seen.setdefault(k, {"interval": own[k], "evals": {}, "failing": set()})
                if not g["lastEvaluation"].startswith("0001"):
                    ev["evals"][g["lastEvaluation"]] = g["evaluationTime"]
                ev["failing"] |= {r["name"] + ": " + r["lastError"] for r in g["rules"] if r["health"] == "err"}
            if warm is None and seen and all(ev["evals"] for ev in seen.values()):
                warm = (time.time(), cpu_ns(m.proc.pid))
            # the first evaluation is cold
            if seen and all(len(v["evals"]) > evals for v in seen.values()):
                break
            time.sleep(2)
        else:
            print("  %s: not every group evaluated enough before the deadline" % tag)
        cpu = (cpu_ns(m.proc.pid) - warm[1]) / 1e9 / ((time.time() - warm[0]) / interval) if warm else math.nan
        for k, ev in seen.items():
            for f in sorted(ev["failing"]):
                print("  %s: %s %s failed: %s" % (tag, k[0], k[1], f[:300]))
    finally:
        m.stop()
    # the same data, nothing evaluated: every rule at its group's last evaluation
    q = Prometheus(prom, data, without_intervals(files, work, tag), work, evaluate=False)
    try:
        for _ in range(2):
            for g in q.api("/api/v1/rules")["groups"]:
                ev = seen[(os.path.basename(g["file"])[len(tag) + 1:], g["name"])]
                ev["samples"], ev["cpu"] = 0, 0.0
                if not ev["evals"]:
                    continue
                at = max(ev["evals"]).replace("Z", "+00:00")
                for r in g["rules"]:
                    c = cpu_ns(q.proc.pid)
                    ev["samples"] += q.api("/api/v1/query", query=r["query"], time=at, stats="all")["stats"]["samples"]["totalQueryableSamples"]
                    ev["cpu"] += (cpu_ns(q.proc.pid) - c) / 1e9
    finally:
        q.stop()
    return seen, cpu


def report(results, pods, days, interval):
    """The table: a row per group, three columns per rule set."""
    keys = []
    for res, _ in results.values():
        keys += [k for k in res if k not in keys]
    print("\n%d pods, %g days of history. eval: the group's evaluation time (Prometheus, median of the warm "
          "evaluations); cpu: Prometheus' CPU time for its rules run one at a time; samples: what they touch" % (pods, days))
    print("| group | interval |" + "".join(" %s eval | cpu | samples |" % v for v in results))
    print("|---|---:|" + "---:|---:|---:|" * len(results))
    totals = {v: [0.0, 0.0, 0] for v in results}
    for k in keys:
        row, iv = "", ""
        for v, (res, _) in results.items():
            ev = res.get(k)
            if ev is None:
                row += " | | |"
                continue
            iv = "%gs" % ev["interval"]
            t = statistics.median([x for _, x in sorted(ev["evals"].items())][1:] or [math.nan])
            share = interval / ev["interval"]  # a 5m group's share of a 30s cycle
            totals[v][0] += t * share
            totals[v][1] += ev.get("cpu", 0) * share
            totals[v][2] += ev.get("samples", 0) * share
            row += " %.3f s | %.3f s | {:,} |".format(ev.get("samples", 0)) % (t, ev.get("cpu", 0))
        print("| %s `%s` | %s |%s" % (k[0], k[1], iv, row))
    print("| all groups, per %d s cycle | |" % interval + "".join(" %.3f s | %.3f s | {:,.0f} |".format(totals[v][2]) % (totals[v][0], totals[v][1]) for v in results))
    print("| Prometheus CPU per %d s cycle (rules, scrape, ingestion) | |" % interval + "".join(" %.3f s | | |" % results[v][1] for v in results), flush=True)


def rule_files(source, work, tag):
    if source.startswith("@"):
        d = os.path.join(work, tag + "-rules")
        os.makedirs(d)
        names = run(["git", "ls-tree", "--name-only", source[1:], "alerts/"], cwd=ROOT).split()
        for n in names:
            if n.endswith(".yml"):
                with open(os.path.join(d, os.path.basename(n)), "w") as f:
                    f.write(run(["git", "show", "%s:%s" % (source[1:], n)], cwd=ROOT))
        source = d
    elif not os.path.isabs(source):
        source = os.path.join(ROOT, source)
    files = sorted(os.path.join(source, n) for n in os.listdir(source) if n.endswith(".yml"))
    if not files:
        sys.exit("no rule files in " + source)
    return files


def main():
    opts = parse(sys.argv[1:])
    variants = [v.split("=", 1) for v in opts.rules] or [["shipped", "alerts"]]
    prom, promtool = tools()
    for pods in opts.pods:
        work = tempfile.mkdtemp(prefix="rule-cost-")
        try:
            one(prom, promtool, pods, opts, variants, work)
        finally:
            shutil.rmtree(work, ignore_errors=True)


def one(prom, promtool, pods, opts, variants, work):
    series = fleet(pods, opts.models)
    end = int(time.time()) // SCRAPE * SCRAPE
    history = int(opts.days * DAY)
    Live.series, Live.origin = series, end - history - DAY  # counters start a day before the history
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Live)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    scrape = "127.0.0.1:%d" % srv.server_address[1]
    t0 = time.time()
    base = os.path.join(work, "raw")
    os.makedirs(base)
    print("%d pods: %d series, %d of them over %g days; backfilling ..." % (pods, len(series), sum(s[0] == "hist" for s in series), opts.days), flush=True)
    backfill_raw(promtool, series, {"hist": end - history, "day": end - min(history, DAY)}, Live.origin, end - history, end, base, work)
    print("  raw history in %.0fs" % (time.time() - t0), flush=True)
    results = {}
    for tag, source in variants:
        files = rule_files(source, work, tag)
        rec = backfill_recorded(prom, promtool, files, history, end, base, work, tag)
        # up to now: the history's series since its end, every series for LIVE
        now = int(time.time()) // SCRAPE * SCRAPE
        tail = os.path.join(work, tag + "-tail")
        os.makedirs(tail)
        backfill_raw(promtool, series, {"hist": end, "day": end, "live": now - LIVE}, Live.origin, min(end, now - LIVE), now, tail, work)
        data = os.path.join(work, tag + "-data")
        link_blocks([base, tail] + rec, data)
        t1 = time.time()
        results[tag] = measure(prom, files, data, scrape, opts.interval, opts.evals, work, tag, time.time() + 4 * 3600)
        print("  %s: measured in %.0fs" % (tag, time.time() - t1), flush=True)
        for d in [data, tail] + rec:
            shutil.rmtree(d)
    srv.shutdown()
    report(results, pods, opts.days, opts.interval)


def parse(args):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pods", default="100", type=lambda s: [int(x) for x in s.split(",")])
    ap.add_argument("--days", default=1.0, type=float)
    ap.add_argument("--models", default=4, type=int)
    ap.add_argument("--interval", default=30, type=int, help="evaluation interval, seconds (scrapes every half)")
    ap.add_argument("--evals", default=3, type=int, help="warm evaluations of each group to wait for (one of a 5m group)")
    ap.add_argument("rules", nargs="*", help="NAME=DIR or NAME=@REV")
    return ap.parse_args(args)


if __name__ == "__main__":
    main()
