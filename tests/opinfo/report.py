"""report.json (the sweep's results, merged across runs) and what is written
from it: report.md and the failures list."""
import collections
import json
import os

STATUSES = ("pass", "falls_back", "raises", "fail", "crash", "hang", "skip")
LETTER = {"pass": "P", "falls_back": "B", "raises": "R", "fail": "F", "crash": "C", "hang": "H", "skip": "S"}
VARIANTS = ("functional", "out", "inplace", "grad", "nonfinite", "reference")
DTYPES = ("float32", "bfloat16", "float16", "int64", "int32", "bool")
BAD = ("crash", "hang", "fail")


def load(path):
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {"runs": {}, "entries": {}}


def merge(data, mode, results, run):
    entries = data["entries"].setdefault(mode, {})
    for r in results:
        entries[f"{r['op']}|{r['variant']}|{r['dtype']}"] = r
    runs = data["runs"].setdefault(mode, [])
    # A run replaces its own earlier snapshots, and partial ones of the same dtypes and ops that it supersedes.
    runs[:] = [r for r in runs if r.get("started") != run.get("started")
               and not (r.get("partial") and r["dtypes"] == run["dtypes"] and r["ops"] == run["ops"])]
    runs.append(run)


def save(data, json_path, md_path):
    with open(json_path, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    with open(md_path, "w") as f:
        f.write(markdown(data))


def repro(mode, r):
    index = (r.get("first") or {}).get("index")
    return (f"TORCHTPU_EAGER_MODE={mode} python tests/opinfo/repro.py {r['op']} {r['variant']} {r['dtype']}"
            + (f" {index}" if index is not None else ""))


def totals(entries):
    """{dtype: Counter(status)} over every entry, and {dtype: (ops passing
    natively in every variant, ops with an entry in that dtype)}."""
    by_dtype = collections.defaultdict(collections.Counter)
    per_op = collections.defaultdict(lambda: collections.defaultdict(list))
    for r in entries.values():
        by_dtype[r["dtype"]][r["status"]] += 1
        per_op[r["dtype"]][r["op"]].append(r["status"])
    native = {}
    for dtype, ops in per_op.items():
        counted = {op: s for op, s in ops.items() if any(x != "skip" for x in s)}
        ok = sum(1 for s in counted.values() if all(x in ("pass", "skip") for x in s))
        native[dtype] = (ok, len(counted))
    return by_dtype, native


def _pct(a, b):
    return f"{100.0 * a / b:.1f}%" if b else "-"


def markdown(data):
    out = ["# OpInfo sweep report", "",
           "PyTorch's `op_db` run on the `tpu` device against the CPU (tests/opinfo; `make opinfo`).",
           "Statuses: pass, falls_back (right result, but an aten op ran on the CPU fallback), raises (an error "
           "where the CPU returns a value), fail (a different result, or a value where the CPU raises), "
           "crash (the worker died), hang (a sample ran past the timeout), skip (the CPU does not implement "
           "the sample).", ""]
    for mode in sorted(data["entries"]):
        entries = data["entries"][mode]
        by_dtype, native = totals(entries)
        out += [f"## Mode: {mode}", ""]
        for run in data["runs"].get(mode, []):
            out.append(f"- run {run['finished']}: dtypes {','.join(run['dtypes'])}, ops {run['ops']}, "
                       f"{run['seconds']:.0f} s with {run['jobs']} workers"
                       + (" (partial)" if run.get("partial") else ""))
        out += ["", "### op_db entries passing natively (every variant of the op passes, no fallback)", "",
                "| dtype | ops passing | ops run | % |", "|---|---|---|---|"]
        for dtype in DTYPES:
            if dtype in native:
                ok, n = native[dtype]
                out.append(f"| {dtype} | {ok} | {n} | {_pct(ok, n)} |")
        out += ["", "### Entries (op, variant, dtype) by status", "",
                "| dtype | entries | " + " | ".join(STATUSES) + " | pass % (of non-skipped) |",
                "|---" * (len(STATUSES) + 3) + "|"]
        for dtype in DTYPES:
            c = by_dtype.get(dtype)
            if not c:
                continue
            n = sum(c.values())
            out.append(f"| {dtype} | {n} | " + " | ".join(str(c[s]) for s in STATUSES)
                       + f" | {_pct(c['pass'], n - c['skip'])} |")
        c = collections.Counter(r["status"] for r in entries.values())
        out.append(f"| all | {sum(c.values())} | " + " | ".join(str(c[s]) for s in STATUSES)
                   + f" | {_pct(c['pass'], sum(c.values()) - c['skip'])} |")
        for label, pick in (("sample inputs (every variant but reference)", lambda v: v != "reference"),
                            ("reference inputs (the samples plus extremal values, atol = rtol = 1e-3 in "
                             "float32 as PyTorch's test_compare_cpu)", lambda v: v == "reference")):
            part = collections.Counter(r["status"] for r in entries.values() if pick(r["variant"]))
            if part:
                n = sum(part.values())
                out.append(f"| {label} | {n} | " + " | ".join(str(part[s]) for s in STATUSES)
                           + f" | {_pct(part['pass'], n - part['skip'])} |")
        for status in ("crash", "hang", "fail", "raises"):
            rows = sorted((r for r in entries.values() if r["status"] == status),
                          key=lambda r: (r["op"], r["variant"], r["dtype"]))
            if not rows:
                continue
            out += ["", f"### {status} ({len(rows)})", "", "| op | variant | dtype | sample | detail |",
                    "|---|---|---|---|---|"]
            for r in rows:
                first = r.get("first") or {}
                out.append(f"| {r['op']} | {r['variant']} | {r['dtype']} | {_cell(first.get('sample'), 80)} "
                           f"| {_cell(first.get('detail'), 200)} |")
        fb, fb_ops = fallback_counts(entries)
        if fb:
            out += ["", f"### CPU fallbacks ({len(fb)} aten ops, by the number of op_db entries using them)", "",
                    "| aten op | calls | op_db entries |", "|---|---|---|"]
            for name in sorted(fb, key=lambda k: (-len(fb_ops[k]), k)):
                ops = sorted(fb_ops[name])
                more = " ..." if len(ops) > 12 else ""
                out.append(f"| {name} | {fb[name]} | {len(ops)}: {', '.join(ops[:12])}{more} |")
        out += ["", "### Every entry", "",
                "Letters per dtype, in variant order " + ", ".join(VARIANTS) + ": "
                + ", ".join(f"{v} {k}" for k, v in LETTER.items()) + ", - not applicable.", "",
                "| op | " + " | ".join(DTYPES) + " |", "|---" * (len(DTYPES) + 1) + "|"]
        grid = collections.defaultdict(dict)
        for r in entries.values():
            grid[r["op"]][(r["variant"], r["dtype"])] = LETTER[r["status"]]
        for op in sorted(grid):
            cells = ["".join(grid[op].get((v, d), "-") for v in VARIANTS) for d in DTYPES]
            out.append(f"| {op} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out) + "\n"


def fallback_counts(entries):
    """(calls per fallen-back aten op, the op_db entries using each)."""
    fb = collections.Counter()
    fb_ops = collections.defaultdict(set)
    for r in entries.values():
        for name, n in r.get("fallbacks", {}).items():
            fb[name] += n
            fb_ops[name].add(r["op"])
    return fb, fb_ops


def _cell(text, limit):
    text = " ".join(str(text or "").split()).replace("|", "\\|")
    return text if len(text) <= limit else text[:limit] + "..."


def write_failures(data, path):
    out = ["# OpInfo sweep: crashes, hangs, wrong results, errors and fallbacks", "",
           "Generated by tests/opinfo/sweep.py from tests/opinfo/report.json. Each repro reruns one sample "
           "from the repository root and prints the device's and the CPU's results; the python line is the "
           "same call written out (exact values up to 8 elements, random beyond).", ""]
    for mode in sorted(data["entries"]):
        entries = data["entries"][mode]
        by_dtype, native = totals(entries)
        out += [f"## Mode: {mode}", "", "Totals (entries by status, per dtype; ops passing natively):", ""]
        for dtype in DTYPES:
            if dtype in by_dtype:
                c = by_dtype[dtype]
                ok, n = native[dtype]
                out.append(f"- {dtype}: " + ", ".join(f"{s} {c[s]}" for s in STATUSES if c[s])
                           + f"; ops passing natively {ok}/{n} ({_pct(ok, n)})")
        for status in ("crash", "hang", "fail"):
            rows = sorted((r for r in entries.values() if r["status"] == status),
                          key=lambda r: (r["op"], r["variant"], r["dtype"]))
            out += ["", f"### {status} ({len(rows)})", ""]
            for r in rows:
                first = r.get("first") or {}
                out += [f"- **{r['op']}** {r['variant']} {r['dtype']}, sample {first.get('index')}: "
                        f"`{_cell(first.get('sample'), 300)}`",
                        f"  - {_cell(first.get('detail'), 600)}",
                        f"  - repro: `{repro(mode, r)}`"]
                if first.get("python"):
                    out.append(f"  - python: `{first['python']}`")
        rows = sorted((r for r in entries.values() if r["status"] == "raises"),
                      key=lambda r: (r["op"], r["variant"], r["dtype"]))
        out += ["", f"### raises ({len(rows)})", ""]
        for r in rows:
            first = r.get("first") or {}
            out.append(f"- {r['op']} {r['variant']} {r['dtype']} (sample {first.get('index')}): "
                       f"{_cell(first.get('detail'), 200)}")
        fb, fb_ops = fallback_counts(entries)
        out += ["", f"### falls back ({len(fb)} aten ops, by the number of op_db entries using them)", ""]
        for name in sorted(fb, key=lambda k: (-len(fb_ops[k]), k)):
            out.append(f"- {name}: {len(fb_ops[name])} entries, {fb[name]} calls: {', '.join(sorted(fb_ops[name]))}")
        out.append("")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(out) + "\n")
    os.replace(tmp, path)
