#!/usr/bin/env python3
"""Post-processing of bench/results/latest.json (written by timehands-bench).

  report.py independent --hyperfine H.json --calls N --json LATEST
  report.py independent --times FILE --times0 FILE --calls N --json LATEST
      the independent vDSO check: per-call cost of a separate N-call program
      timed from outside, compared with timehands-bench's vdso figure; the
      result is added to LATEST as "independent_check"
  report.py plot-data LATEST DIR      scaling.dat and percall.dat for plot.gp
  report.py readme LATEST [README [DOCDIR]]
      the full report of LATEST to DOCDIR/results-MACHINE.md (DOCDIR: doc/
      next to README; MACHINE: CPU vendor, AMD family and model, and clocksource, e.g.
      amd-epyc-kvm-clock), and a short table with a link to it as the README
      section between <!-- bench:begin --> and <!-- bench:end --> (printed
      when the markers are absent)
  report.py validate LATEST [IMPL...] the shape of LATEST (the bench's smoke test):
      machine context, every table, and a per-call row for each IMPL named
"""
import json
import re
import os
import statistics
import sys

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
MONO = "clock_gettime(CLOCK_MONOTONIC)"
PERCALL_IMPLS = [
    ("syscall", "syscall"),
    ("vdso", "vdso"),
    ("timehands", "timehands"),
    ("timehands-preload", "preload"),
    ("timehands-preload-relaxed", "preload, relaxed"),
    ("timehands-shared", "shared page"),
]
SCALE_IMPLS = [("vdso", "vdso"), ("timehands", "timehands"), ("naive-cas", "naive global CAS")]
AGREE = 0.15  # relative difference accepted between the two measurements


def load(path):
    with open(path) as f:
        return json.load(f)


def save(path, doc):
    """Same layout as timehands-bench writes: one result per line."""
    out = ["{"]
    keys = list(doc)
    for i, k in enumerate(keys):
        v = doc[k]
        comma = "," if i + 1 < len(keys) else ""
        if isinstance(v, list):
            out.append('  "%s": [' % k)
            for j, item in enumerate(v):
                out.append("    " + json.dumps(item) + ("," if j + 1 < len(v) else ""))
            out.append("  ]" + comma)
        else:
            out.append('  "%s": %s%s' % (k, json.dumps(v), comma))
    out.append("}")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)


def row(doc, table, op, impl, threads=None):
    for r in doc.get("results", []):
        if r.get("table") == table and r.get("op") == op and r.get("impl") == impl and (
            threads is None or r.get("threads") == threads
        ):
            return r
    return None


def short(op):
    """clock_gettime(CLOCK_MONOTONIC) -> MONOTONIC, for plot labels."""
    if op.startswith("clock_gettime("):
        op = op[len("clock_gettime(") : -1]
        for p in ("TH_CLOCK_", "CLOCK_"):
            if op.startswith(p):
                op = op[len(p) :]
    return op.replace("(TIME_UTC)", "")


# ---------------------------------------------------------------- independent


def cmd_independent(args):
    opts = dict(zip(args[::2], args[1::2]))
    calls = int(opts["--calls"])
    cpu = None
    if "--hyperfine" in opts:
        h = load(opts["--hyperfine"])["results"]
        med = (h[0]["median"] - h[1]["median"]) / calls * 1e9
        low = (h[0]["min"] - h[1]["min"]) / calls * 1e9
        if all("user" in x and "system" in x for x in h[:2]):
            # the processes' own CPU time, the clock timehands-bench times its loops with
            cpu = (h[0]["user"] + h[0]["system"] - h[1]["user"] - h[1]["system"]) / calls * 1e9
        tool = "hyperfine, a separate %d-call program timed from outside minus the same with 0 calls" % calls
    else:
        def times(p):
            with open(p) as f:
                return [int(x) / 1e9 for x in f if x.strip()]

        a, b = times(opts["--times"]), times(opts["--times0"])
        med = (statistics.median(a) - statistics.median(b)) / calls * 1e9
        low = (min(a) - min(b)) / calls * 1e9
        tool = "date +%%s%%N around a separate %d-call program, minus the same with 0 calls" % calls
    doc = load(opts["--json"])
    r = row(doc, "percall", MONO, "vdso")
    check = {"op": MONO, "impl": "vdso", "independent_ns_per_call": round(med, 3),
             "independent_ns_min": round(low, 3), "tool": tool}
    line = "independent check, vDSO %s: wall %.1f ns/call median, %.1f min" % (MONO, med, low)
    if cpu is not None:
        check["independent_ns_cpu"] = round(cpu, 3)
        line += ", CPU time %.1f" % cpu
    line += " (%s)" % tool
    if r and med > 0 and low > 0:
        # A busy machine inflates wall-clock figures unevenly: the CPU-time
        # figures (the clock both sides then use) or the fastest runs of
        # each agreeing is agreement.
        ratio, ratio_min = r["ns_per_call"] / med, r["ns_min"] / low
        pairs = [ratio_min]
        if cpu:
            check["ratio_cpu"] = round(r["ns_per_call"] / cpu, 4)
            pairs.append(check["ratio_cpu"])
        agree = any(abs(x - 1) <= AGREE for x in pairs)
        check.update(bench_ns_per_call=r["ns_per_call"], bench_ns_min=r["ns_min"], ratio=round(ratio, 4),
                     ratio_min=round(ratio_min, 4), agree=agree)
        line += "\n  timehands-bench: %.1f ns/call median, %.1f min; ratios %.3f (medians), %.3f (minima)%s: %s" % (
            r["ns_per_call"], r["ns_min"], ratio, ratio_min,
            ", %.3f (CPU time)" % check["ratio_cpu"] if cpu else "",
            "agree (within %d%%)" % (AGREE * 100) if agree else "DISAGREE by more than %d%% (a busy machine?)" % (AGREE * 100))
    doc["independent_check"] = check
    save(opts["--json"], doc)
    print(line)


# ---------------------------------------------------------------- plot data


def cmd_plot_data(args):
    doc, outdir = load(args[0]), args[1]
    threads = sorted({r["threads"] for r in doc["results"] if r.get("table") == "scaling"})
    with open(os.path.join(outdir, "scaling.dat"), "w") as f:
        f.write("# threads " + " ".join("%s_wall %s_ns" % (i, i) for i, _ in SCALE_IMPLS) + "\n")
        for t in threads:
            cells = []
            for impl, _ in SCALE_IMPLS:
                r = row(doc, "scaling", MONO, impl, t)
                cells += ["%.6f" % r.get("wall_s", 0.0), "%.3f" % r["ns_per_call"]] if r else ["-", "-"]
            f.write("%d %s\n" % (t, " ".join(cells)))
    ops = []
    for r in doc["results"]:
        if r.get("table") == "percall" and r["op"] not in ops:
            ops.append(r["op"])
    impls = [i for i in PERCALL_IMPLS[1:] if any(row(doc, "percall", op, i[0]) for op in ops)]
    with open(os.path.join(outdir, "percall.dat"), "w") as f:
        f.write("op " + " ".join('"%s"' % label for _, label in impls) + ' "floor"\n')
        for op in ops:
            cells = []
            for impl, _ in impls:
                r = row(doc, "percall", op, impl)
                cells.append("%.3f" % r["ns_per_call"] if r else "-")
            floor = next((r for r in doc["results"] if r.get("table") == "percall" and r["op"] == op and r.get("floor_ns")), None)
            cells.append("%.3f" % floor["floor_ns"] if floor else "-")
            f.write('"%s" %s\n' % (short(op), " ".join(cells)))
    with open(os.path.join(outdir, "plot.vars"), "w") as f:
        m = doc["machine"]
        title = "%s, %d CPUs, %s, %s, %s" % (m["cpu"], m["cpus_usable"], m["clocksource"], m["kernel"], m["date"])
        f.write("title = %s\nncol = %d\n" % (json.dumps(title), len(impls) + 2))


# ---------------------------------------------------------------- README

GENERATED = "<!-- generated by bench/report.py from bench/results/latest.json: make bench rewrites this file -->"
# The README's short table: (label, path, table, op, impl); the ratio is the
# row's own, taken against the kernel's read measured in the same run.
SUMMARY_ROWS = [
    ("`clock_gettime(CLOCK_MONOTONIC)`", "linked, inline", "percall", MONO, "timehands"),
    ("`clock_gettime(CLOCK_REALTIME)`", "linked, inline", "percall", "clock_gettime(CLOCK_REALTIME)", "timehands"),
    ("`clock_gettime(CLOCK_MONOTONIC)`", "linked, library call", "percall",
     MONO + " (th_clock_gettime library call)", "timehands"),
    ("`clock_gettime(CLOCK_MONOTONIC)`", "linked, daemon's page", "percall", MONO, "timehands-shared"),
    ("`clock_gettime(CLOCK_MONOTONIC)`", "`timehands run`", "percall", MONO, "timehands-preload"),
    ("`clock_gettime(CLOCK_MONOTONIC)`", "`timehands run --relaxed`", "percall", MONO, "timehands-preload-relaxed"),
    ("`clock_gettime(TH_CLOCK_MONOTONIC_RELAXED)`", "linked, inline", "percall",
     "clock_gettime(TH_CLOCK_MONOTONIC_RELAXED)", "timehands"),
    ("`time()`", "linked, inline", "percall", "time", "timehands"),
    ("`clock_gettime(CLOCK_MONOTONIC_COARSE)`", "linked", "percall", "clock_gettime(CLOCK_MONOTONIC_COARSE)", "timehands"),
    ("`times()`", "linked, `th_times()`", "cputime", "times", "timehands"),
]
G3_CHECK = "time() < second of an earlier gettimeofday()"


def fmt_ns(v):
    if v is None:
        return ""
    if v >= 100:
        return "%.0f" % v
    return "%.1f" % v


def busy(m):
    try:
        load1 = float(m.get("loadavg", "0").split()[0])
    except ValueError:
        return False
    return load1 > 0.5 * m.get("cpus_usable", 1)


def when(m):
    return m["date"].replace("T", " ").replace("Z", " UTC")


def slug(m):
    """CPU vendor, family and clocksource, e.g. amd-epyc-kvm-clock: one results file per machine kind."""
    words = m.get("cpu", "").replace("(R)", " ").replace("(r)", " ").replace("(TM)", " ").replace("(tm)", " ")
    words = [w for w in words.lower().replace("@", " ").split() if w not in ("cpu", "processor")]
    # "11th Gen Intel Core i7" names its vendor second: start at the vendor where there is one
    start = next((i for i, w in enumerate(words) if w in ("intel", "amd", "arm", "ampere", "apple")), 0)
    name = words[start : start + 2] or ["unknown"]
    fam = re.search(r"\(family ([0-9a-f]+)h(?:, model ([0-9a-f]+)h)?", m.get("cpu", ""))
    if fam:
        # a guest's model name hides the generation: Intel's all read "Xeon
        # Processor", and one AMD family spans two (19h: Zen 3 and Zen 4)
        name.append("f%sh" % fam.group(1))
        if fam.group(2):
            name.append("m%sh" % fam.group(2))
    text = "-".join(name + [m.get("clocksource", "unknown")])
    return "-".join(p for p in "".join(c if c.isascii() and c.isalnum() else "-" for c in text.lower()).split("-") if p)


def percall_ops(doc):
    ops = []
    for r in doc["results"]:
        if r.get("table") == "percall" and r["op"] not in ops:
            ops.append(r["op"])
    return ops


def full_report(doc):
    m, th = doc["machine"], doc["machine"].get("timehands", {})
    s = doc.get("settings", {})
    out = []
    w = out.append
    w(GENERATED)
    w("# `make bench` on %s, clocksource %s" % (m["cpu"], m["clocksource"]))
    w("")
    w(
        "`make bench` on %s: %s, %d CPUs (%d online; hypervisor signature \"%s\"), %s, clocksource %s, %s, %s; "
        "timehands mode %s, counter %s at %.3f MHz (frequency from %s, uncertainty %s ppm)%s. Load average %s%s; "
        "every ratio below is taken within one run, round by round.%s"
        % (
            when(m),
            m["cpu"],
            m["cpus_usable"],
            m.get("cpus_online", m["cpus_usable"]),
            m.get("hypervisor", "?"),
            m["kernel"],
            m["clocksource"],
            m.get("libc", ""),
            m.get("compiler", ""),
            th.get("mode", "?"),
            th.get("counter", "?"),
            th.get("freq_hz", 0) / 1e6,
            th.get("freq_source", "?"),
            "%.3f" % th["freq_uncertainty_ppm"] if "freq_uncertainty_ppm" in th else "?",
            "; status reason: %s" % th["reason"] if th.get("reason") else "",
            m.get("loadavg", "?"),
            " (a busy machine: other work competed for the CPUs)" if busy(m) else "",
            " (--quick run.)" if s.get("quick") else "",
        )
    )
    w("")
    if s:
        w("Settings: " + ", ".join("%s %s" % (k, json.dumps(v)) for k, v in s.items()) + ".")
        w("")
    for n in doc.get("notes", []):
        w("- " + n)
    if doc.get("notes"):
        w("")

    # per call
    ops = percall_ops(doc)
    impls = [i for i in PERCALL_IMPLS if any(row(doc, "percall", op, i[0]) for op in ops)]
    w(
        "**Per call**: median ns (thread CPU time) over %s interleaved runs of 10^6–10^7 calls (× vDSO: median of the per-round ratios "
        "against the libc call in the same process; the floor is the hardware's, measured in the same rounds)." % s.get("rounds", "?")
    )
    w("")
    w("| operation | " + " | ".join(label for _, label in impls) + " | floor |")
    w("|---|" + "--:|" * (len(impls) + 1))
    for op in ops:
        cells = []
        floor = None
        for impl, _ in impls:
            r = row(doc, "percall", op, impl)
            if not r:
                cells.append("")
                continue
            c = fmt_ns(r["ns_per_call"])
            if impl != "vdso" and r.get("ratio_vdso"):
                c += " (%.2f×)" % r["ratio_vdso"]
            cells.append(c)
            if r.get("floor_ns") and not floor:
                floor = "%s %s" % (r["floor"], fmt_ns(r["floor_ns"]))
        w("| `%s` | %s | %s |" % (op, " | ".join(cells), floor or ""))
    floors = [r for r in doc["results"] if r.get("table") == "floor"]
    if floors:
        w("")
        w("Floors (the hardware's; `seq;...;timespec`: the least a sequence-locked reader returning a timespec costs): "
          + ", ".join("`%s` %s ns" % (r["op"], fmt_ns(r["ns_per_call"])) for r in floors) + ".")
    w("")

    # the fastest round of each, which a busy machine disturbs least
    if any(r.get("ns_min") for r in doc["results"] if r.get("table") == "percall"):
        w("**Fastest run and cost over the floor**: each cell is the fastest run's ns per call, then the median of the "
          "per-round differences to the row's floor in the table above (ns).")
        w("")
        w("| operation | " + " | ".join(label for _, label in impls) + " |")
        w("|---|" + "--:|" * len(impls))
        for op in ops:
            cells = []
            for impl, _ in impls:
                r = row(doc, "percall", op, impl)
                c = fmt_ns(r.get("ns_min")) if r else ""
                if r and r.get("over_floor_ns") is not None and impl != "syscall":
                    c += " / %+.1f" % r["over_floor_ns"]
                cells.append(c)
            w("| `%s` | %s |" % (op, " | ".join(cells)))
        w("")

    # scaling
    threads = sorted({r["threads"] for r in doc["results"] if r.get("table") == "scaling"})
    if threads:
        w(
            "**Scalability**: %s calls of `%s` per thread; WALL in seconds from the common start to the "
            "last thread's end; ns/call from each thread's own CPU time." % (format(s.get("scale_calls", 0), ","), MONO)
        )
        w("")
        w("| threads | " + " | ".join("%s WALL | WALL/threads | ns/call" % label for _, label in SCALE_IMPLS) + " |")
        w("|--:|" + "--:|" * (3 * len(SCALE_IMPLS)))
        for t in threads:
            cells = []
            for impl, _ in SCALE_IMPLS:
                r = row(doc, "scaling", MONO, impl, t)
                # the bench leaves zero values out of its JSON
                wall = r.get("wall_s", 0.0) if r else 0.0
                cells += ["%.3f" % wall, "%.4f" % (wall / t), fmt_ns(r.get("ns_per_call", 0.0))] if r else ["", "", ""]
            w("| %d | %s |" % (t, " | ".join(cells)))
        two = [(label, row(doc, "scaling", MONO, impl, 2)) for impl, label in SCALE_IMPLS]
        if all(r and r.get("ratio_1t") for _, r in two):
            w("")
            w("Per-call cost at 2 threads vs 1: " + ", ".join("%s %.3f×" % (label, r["ratio_1t"]) for label, r in two) + ".")
        w("")

    # guarantees
    g = doc.get("guarantees", [])
    if g:
        gimpls = [i for i in ("kernel", "timehands", "timehands-shared") if any(c["impl"] == i for c in g)]
        w("**Guarantees**: violations over the same number of reads (0 is the promise; the shared child's own count "
          "of reads where it differs).")
        w("")
        w("| check | | reads | " + " | ".join(gimpls) + " |")
        w("|---|---|--:|" + "--:|" * len(gimpls))
        seen = []
        for c in g:
            if c["check"] in seen:
                continue
            seen.append(c["check"])
            xs = [next((y for y in g if y["check"] == c["check"] and y["impl"] == i), None) for i in gimpls]
            reads = next(x["reads"] for x in xs if x)
            cells = []
            for x in xs:
                if not x:
                    cells.append("–")
                    continue
                cell = "%d (%.3f%%)" % (x["violations"], 100.0 * x["violations"] / max(x["reads"], 1)) if x["violations"] else "0"
                # the shared child counts over its own number of reads
                cells.append(cell + (" of %d" % x["reads"] if x["reads"] != reads else ""))
            note = next((y.get("note") for y in g if y["check"] == c["check"] and y.get("note")), "")
            w("| %s%s | %s | %d | %s |" % (c["check"], " (%s)" % note if note else "", c["guarantee"], reads, " | ".join(cells)))
        w("")

    # tails
    tails = [r for r in doc["results"] if r.get("table") == "tails"]
    if tails:
        w("**Tails** (single reads, each between two ordered counter reads; `empty`: that pair alone; ns; "
          "publishing: a second thread reads the same clock meanwhile):")
        w("")
        w("| read, condition | implementation | p50 | p99 | p99.9 | max | process |")
        w("|---|---|--:|--:|--:|--:|---|")
        for r in tails:
            w("| `%s` | %s | %s | %s | %s | %s | %s |" % (r["op"], r["impl"], fmt_ns(r.get("p50_ns")),
                                                    fmt_ns(r.get("p99_ns")), fmt_ns(r.get("p999_ns")),
                                                    fmt_ns(r.get("max_ns")),
                                                    r.get("note", "").replace("measured in the ", "").replace(" process", "")))
        w("")

    # other tables (the CPU-time program's rows)
    other = [r for r in doc["results"] if r.get("table") not in ("percall", "floor", "scaling", "tails")]
    if other:
        w("**CPU-time clocks** (bench/cputime):")
        w("")
        w("| operation | implementation | threads | ns/call | × kernel | over timehands' MONOTONIC_COARSE |")
        w("|---|---|--:|--:|--:|--:|")
        for r in other:
            rk = r.get("ratio_kernel")
            over = r.get("over_floor_ns")
            w("| `%s` | %s | %s | %s | %s | %s |" % (r.get("op", ""), r.get("impl", ""), r.get("threads", ""),
                                                   fmt_ns(r.get("ns_per_call")), "%.3f" % rk if rk else "",
                                                   "%+.1f (%s)" % (over, fmt_ns(r.get("floor_ns")))
                                                   if over is not None else ""))
        w("")
        w("The last column: the median of per-round differences to timehands' `CLOCK_MONOTONIC_COARSE` "
          "(its median in parentheses), read by the same program in the same rounds.")
        w("")

    # targets
    t = doc.get("targets", [])
    if t:
        w("**Targets** (the performance targets the bench checks) in this run:")
        w("")
        for x in t:
            if x["unit"] == "ns":
                val = "%+.1f ns (target ≤ %+.1f ns)" % (x["value"], x["limit"])
            else:
                val = "%.2f× (target %s %.2f×)" % (x["value"], "≥" if x["unit"] == "x>=" else "≤", x["limit"])
            w("- %s %s, %s: %s" % ("met:" if x["met"] else "**missed**:", x["impl"], x["target"], val))
        w("")

    ic = doc.get("independent_check")
    if ic:
        line = "Independent check of the vDSO figure (`%s`) by %s: %.1f ns/call (wall, median; min %.1f%s)" % (
            ic["op"], ic["tool"], ic["independent_ns_per_call"], ic["independent_ns_min"],
            "; CPU time %.1f" % ic["independent_ns_cpu"] if "independent_ns_cpu" in ic else "")
        if "bench_ns_per_call" in ic:
            line += "; timehands-bench %.1f (min %.1f): %s." % (
                ic["bench_ns_per_call"], ic["bench_ns_min"], "they agree" if ic["agree"] else "they disagree")
        w(line)
        w("")
    w("Every figure above is in the run's `bench/results/latest.json` (which the next run overwrites); "
      "reproduce with `make bench` on a machine of this kind.")
    return "\n".join(out) + "\n"


def summary(doc, link, others):
    """The README's section: a handful of rows, each against the kernel's read in the same run."""
    m, th = doc["machine"], doc["machine"].get("timehands", {})
    out = []
    w = out.append
    w(
        "`make bench` on %s: %s, %d CPUs (hypervisor \"%s\"), clocksource %s, %s; counter %s. Median ns per call, "
        "and the median of its per-round ratios to the kernel's own read in the same run (the vDSO through libc; "
        "for `times()` the system call): below 1, timehands is cheaper.%s%s"
        % (when(m), m["cpu"], m["cpus_usable"], m.get("hypervisor", "?"), m["clocksource"], m["kernel"],
           th.get("counter", "?"),
           " A busy machine (load average %s)." % m.get("loadavg") if busy(m) else "",
           " A `--quick` run." if doc.get("settings", {}).get("quick") else "")
    )
    w("")
    w("| read | path | kernel | timehands | ratio |")
    w("|---|---|--:|--:|--:|")
    for label, path, table, op, impl in SUMMARY_ROWS:
        r = row(doc, table, op, impl, 1)
        if not r:
            continue
        if table == "cputime":
            k = row(doc, table, op, "syscall", 1)
            ref, ratio = (k or {}).get("ns_per_call"), r.get("ratio_kernel")
        else:
            ref, ratio = r.get("vdso_ref_ns"), r.get("ratio_vdso")
        w("| %s | %s | %s | %s | %s |" % (label, path, fmt_ns(ref), fmt_ns(r["ns_per_call"]),
                                          ("%.3f×" if ratio < 0.1 else "%.2f×") % ratio if ratio else ""))
    g = doc.get("guarantees", [])
    k = next((c for c in g if c["check"] == G3_CHECK and c["impl"] == "kernel"), None)
    t = next((c for c in g if c["check"] == G3_CHECK and c["impl"] == "timehands"), None)
    if k and t:
        w("")
        w("`time()` below the second of an earlier `gettimeofday()` (G3): kernel %s of %s pairs (%.3f %%), "
          "timehands %s of %s." % (format(k["violations"], ","), format(k["reads"], ","),
                                   100.0 * k["violations"] / max(k["reads"], 1), format(t["violations"], ","),
                                   format(t["reads"], ",")))
    w("")
    w("Every table of this run (all clocks, the daemon's page, scalability, guarantee counts, the hardware floor): "
      "[%s](%s)." % (link, link))
    if others:
        w("Other machines: " + ", ".join("[%s](%s)" % (o.split("/")[-1][len("results-") : -len(".md")], o)
                                         for o in others) + ".")
    return "\n".join(out) + "\n"


def write(path, text):
    """Atomically, and only when it changes, so that a rerun leaves the file's time alone."""
    if os.path.exists(path):
        with open(path) as f:
            if f.read() == text:
                return
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def generated(path):
    with open(path) as f:
        return f.readline().strip() == GENERATED


def cmd_readme(args):
    doc = load(args[0])
    path = os.path.normpath(args[1]) if len(args) > 1 else "README.md"
    docdir = args[2] if len(args) > 2 else os.path.join(os.path.dirname(path), "doc")
    os.makedirs(docdir, exist_ok=True)
    full = os.path.join(docdir, "results-%s.md" % slug(doc["machine"]))
    if os.path.exists(full) and not generated(full):
        sys.exit("report.py: %s was not written by report.py; not overwritten" % full)
    write(full, full_report(doc))
    print("README: full results in %s" % full)

    def rel(p):
        return os.path.relpath(p, os.path.dirname(os.path.abspath(path))).replace(os.sep, "/")

    others = []
    for name in sorted(os.listdir(docdir)):
        p = os.path.join(docdir, name)
        if name.startswith("results-") and name.endswith(".md") and p != full:
            if generated(p):
                others.append(rel(p))
    text = summary(doc, rel(full), others)
    body = None
    if os.path.exists(path):
        with open(path) as f:
            body = f.read()
    if body is None or BEGIN not in body or END not in body or body.index(BEGIN) > body.index(END):
        print("README: no %s ... %s markers in %s; the section follows:\n" % (BEGIN, END, path))
        sys.stdout.write(text)
        return
    a = body.index(BEGIN) + len(BEGIN)
    b = body.index(END)
    write(path, body[:a] + "\n" + text + body[b:])
    print("README: results section of %s regenerated" % path)


# ---------------------------------------------------------------- validate


def cmd_validate(args):
    doc = load(args[0])
    errors = []

    def need(cond, what):
        if not cond:
            errors.append(what)

    m = doc.get("machine", {})
    for k in ("date", "cpu", "cpus_usable", "kernel", "clocksource", "timehands"):
        need(k in m, "machine.%s missing" % k)
    for k in ("mode", "counter", "freq_source"):
        need(k in m.get("timehands", {}), "machine.timehands.%s missing" % k)
    res = doc.get("results", [])
    for r in res:
        for k in ("op", "impl", "threads", "ns_per_call"):
            need(k in r, "result without %s: %s" % (k, r))
        need(r.get("ns_per_call", 0) > 0, "ns_per_call not positive: %s" % r)
    for impl in ["syscall", "vdso", "timehands"] + args[1:]:
        need(any(r.get("table") == "percall" and r.get("impl") == impl for r in res), "no per-call row for %s" % impl)
    for op in ("clock_gettime(CLOCK_MONOTONIC)", "clock_gettime(CLOCK_REALTIME_COARSE)", "gettimeofday", "time",
               "timespec_get(TIME_UTC)", "clock_gettime(TH_CLOCK_MONOTONIC_RELAXED)"):
        need(any(r.get("table") == "percall" and r.get("op") == op for r in res), "no per-call row for %s" % op)
    need(any(r.get("table") == "floor" for r in res), "no floor rows")
    if any(a in m.get("kernel", "") for a in ("x86_64", "aarch64")):
        # where the counter has a floor, the minimal reader's stands beside it
        # and every fine target names it
        need(any(r.get("table") == "floor" and r.get("op", "").startswith("seq;") for r in res),
             "no minimal reader floor (seq;...;timespec)")
        need(any("seq;" in t.get("target", "") for t in doc.get("targets", [])),
             "no target names the minimal reader floor")
    for impl in ("empty", "vdso", "timehands", "timehands (call)"):
        need(any(r.get("table") == "tails" and r.get("impl") == impl and r.get("p999_ns", 0) > 0 for r in res),
             "no tails row for %s" % impl)
    for impl in ("vdso", "timehands", "naive-cas"):
        need(any(r.get("table") == "scaling" and r.get("impl") == impl and r.get("threads", 0) > 1 for r in res),
             "no multi-thread scaling row for %s" % impl)
    g = doc.get("guarantees", [])
    need(any(c.get("impl") == "kernel" for c in g) and any(c.get("impl") == "timehands" for c in g),
         "guarantee table lacks kernel or timehands")
    need(all(c.get("reads", 0) > 0 for c in g), "a guarantee check with no reads")
    need(doc.get("targets"), "no targets evaluated")
    if errors:
        sys.exit("validate %s:\n  " % args[0] + "\n  ".join(errors))
    print("validate %s: %d results, %d checks, %d targets" % (args[0], len(res), len(g), len(doc["targets"])))


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cmd, args = sys.argv[1], sys.argv[2:]
    {"independent": cmd_independent, "plot-data": cmd_plot_data, "readme": cmd_readme,
     "validate": cmd_validate}[cmd](args)


if __name__ == "__main__":
    main()
