"""The timeline trace end to end (label unit, tests/trace.cmake): 4 ranks run tests/trace_ops.c
under tutti-run with TUTTI_TRACE_FILE set; tutti-trace merges their files; this script checks
the merged JSON on its own terms (it does not trust the tool):
  - every event is well formed: a name, a phase, a rank and a row; complete events have a start
    and a duration >= 0 and their arguments, operations their collective's fields;
  - every step lies inside an operation of its own rank and row with its sequence number, and
    every operation's steps are numbered 0, 1, 2... in time order;
  - on every rank and row, sequence numbers increase with time; collectives are numbered 1..n;
  - every rank ran the same collectives (name, sequence, count, datatype, algorithm, root);
  - each rank's file says it dropped nothing, and the merge kept every event of every file.
Then tutti-trace renders it as SVG (which must parse, and hold a bar per operation and step) and
as HTML, and headless Chromium, where installed, screenshots the HTML (a PNG that is not blank).
Usage: test_trace.py TUTTI_RUN TRACE_OPS TUTTI_TRACE WORK_DIR [PICTURE_OUT]"""

import glob
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET

failures = []


def check(cond, msg):
    if not cond:
        failures.append(msg)
        print("FAIL: " + msg)
    return cond


def run(cmd, quiet=False, **kw):
    print("+ " + " ".join(cmd))
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       universal_newlines=True, **kw)
    if not quiet or r.returncode != 0:
        print(r.stdout, end="")
    if r.returncode != 0:
        print("test_trace: command failed with exit %d" % r.returncode)
        sys.exit(1)
    return r.stdout


def main():
    tutti_run, trace_ops, tool, work = sys.argv[1:5]
    picture = sys.argv[5] if len(sys.argv) > 5 else None
    nranks = 4
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    env = dict(os.environ, TUTTI_TRACE_FILE=os.path.join(work, "trace-%r.json"),
               NCCL_ALGO="allreduce:ring")
    run([tutti_run, "-n", str(nranks), "--timeout", "60", trace_ops], env=env)
    files = sorted(glob.glob(os.path.join(work, "trace-*.json")))
    if not check(len(files) == nranks, "%d trace files, want %d: %s" % (len(files), nranks, files)):
        return
    per_rank = {}
    for f in files:
        with open(f) as fh:
            doc = json.load(fh)
        other = doc["otherData"]
        per_rank[other["rank"]] = doc
        check(other["dropped"] == 0, "%s dropped %s events" % (f, other["dropped"]))
        check(other["nranks"] == nranks, "%s: nranks %s" % (f, other["nranks"]))
    merged_path = os.path.join(work, "merged.json")
    run([sys.executable, tool, "merge", "-o", merged_path] + files)
    with open(merged_path) as fh:
        merged = json.load(fh)
    events = merged["traceEvents"]
    xs = [e for e in events if e.get("ph") == "X"]
    want = sum(1 for d in per_rank.values() for e in d["traceEvents"] if e.get("ph") == "X")
    check(len(xs) == want, "merged %d complete events, the files hold %d" % (len(xs), want))

    # Well-formed events.
    for e in events:
        ok = isinstance(e.get("name"), str) and e.get("ph") in ("X", "M") and \
            isinstance(e.get("pid"), int) and 0 <= e["pid"] < nranks
        if e.get("ph") == "X":
            a = e.get("args", {})
            ok = ok and isinstance(e.get("tid"), int) and isinstance(e.get("ts"), (int, float)) \
                and isinstance(e.get("dur"), (int, float)) and e["dur"] >= 0 \
                and e.get("cat") in ("op", "step") and isinstance(a.get("seq"), int) \
                and isinstance(a.get("bytes"), int)
            if e.get("cat") == "op":
                ok = ok and all(k in a for k in ("count", "dtype", "algo", "proto"))
            else:
                ok = ok and isinstance(a.get("step"), int)
        if not check(ok, "malformed event: %s" % e):
            return

    ops = [e for e in xs if e["cat"] == "op"]
    steps = [e for e in xs if e["cat"] == "step"]
    check(len(steps) > 0, "no steps recorded")
    # Steps inside their operation, numbered in time order.
    index = {(e["pid"], e["tid"], e["args"]["seq"]): e for e in ops}
    check(len(index) == len(ops), "two operations share rank, row and sequence number")
    eps = 0.002  # microseconds: the files round to nanoseconds
    by_op = {}
    for s in steps:
        key = (s["pid"], s["tid"], s["args"]["seq"])
        op = index.get(key)
        if not check(op is not None, "step without its operation: %s" % s):
            continue
        check(op["ts"] - eps <= s["ts"] and s["ts"] + s["dur"] <= op["ts"] + op["dur"] + eps,
              "step %s [%s, +%s] outside its operation %s [%s, +%s]"
              % (s["name"], s["ts"], s["dur"], op["name"], op["ts"], op["dur"]))
        by_op.setdefault(key, []).append(s)
    for key, ss in by_op.items():
        ss.sort(key=lambda s: s["ts"])
        check([s["args"]["step"] for s in ss] == list(range(len(ss))),
              "steps of %s not numbered 0..n in time order: %s"
              % (key, [s["args"]["step"] for s in ss]))
    # Sequence numbers in order on every rank and row.
    rows = {}
    for e in sorted(ops, key=lambda e: e["ts"]):
        rows.setdefault((e["pid"], e["tid"]), []).append(e)
    for (rank, tid), row in rows.items():
        seqs = [e["args"]["seq"] for e in row]
        check(seqs == sorted(seqs) and len(set(seqs)) == len(seqs),
              "rank %d row %d: sequence numbers out of order: %s" % (rank, tid, seqs))
        if tid == 0:
            check(seqs == list(range(1, len(seqs) + 1)),
                  "rank %d: collectives numbered %s, not 1..n" % (rank, seqs))
    # The same collectives on every rank; trace_ops issues 5 and one send and receive each.
    def signature(rank):
        return [(e["name"], e["args"]["seq"], e["args"]["count"], e["args"]["dtype"],
                 e["args"]["algo"], e["args"].get("root")) for e in rows.get((rank, 0), [])]
    ref = signature(0)
    check(len(ref) == 5, "rank 0 traced %d collectives, trace_ops issues 5" % len(ref))
    for r in range(1, nranks):
        check(signature(r) == ref, "rank %d's collectives differ from rank 0's:\n  %s\n  %s"
              % (r, signature(r), ref))
    for r in range(nranks):
        p2p = sorted(e["name"] for e in ops if e["pid"] == r and e["tid"] != 0)
        check(p2p == ["Recv", "Send"], "rank %d: point-to-point operations %s" % (r, p2p))

    # The picture.
    svg_path = os.path.join(work, "trace.svg")
    html_path = os.path.join(work, "trace.html")
    run([sys.executable, tool, "render", "-o", svg_path, merged_path])
    run([sys.executable, tool, "render", "-o", html_path] + files)
    root = ET.parse(svg_path).getroot()
    rects = [el for el in root.iter() if el.tag.endswith("rect") and el.find(
        "{http://www.w3.org/2000/svg}title") is not None]
    check(len(rects) == len(xs), "the SVG has %d bars for %d events" % (len(rects), len(xs)))
    check(os.path.getsize(html_path) > os.path.getsize(svg_path), "the HTML is smaller than the SVG")
    stats = run([sys.executable, tool, "stats", merged_path])
    check("AllReduce" in stats and "Ring" in stats, "stats lack AllReduce over Ring")
    if picture:
        shutil.copy(svg_path, picture)
    check_two_comms(tool, work)

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("test_trace: no chromium; the HTML was not screenshotted "
              "(tools/install-deps.sh installs it)")
    else:
        png = os.path.join(work, "trace.png")
        run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
             "--window-size=1200,%d" % int(root.get("height")), "--screenshot=" + png,
             "file://" + os.path.abspath(html_path)], quiet=True)
        with open(png, "rb") as fh:
            data = fh.read()
        check(data[:8] == b"\x89PNG\r\n\x1a\n", "the screenshot is not a PNG")
        # A blank page compresses to a few hundred bytes; bars and text make it kilobytes.
        check(len(data) > 5000, "the screenshot is %d bytes: blank?" % len(data))
        if picture:
            shutil.copy(png, os.path.splitext(picture)[0] + ".png")
    if failures:
        print("test_trace: %d failures" % len(failures))
        sys.exit(1)
    print("test_trace: ok (%d operations, %d steps, %d ranks)" % (len(ops), len(steps), nranks))


def check_two_comms(tool, work):
    """Files of two communicators hold the same rank: the merge keeps them on rows of their
    own, named with their communicator, and stats counts them apart."""
    paths = []
    for comm in (1, 2):
        doc = {"traceEvents": [
            {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "rank 0"}},
            {"name": "AllReduce", "cat": "op", "ph": "X", "pid": 0, "tid": 0, "ts": 10.0 * comm,
             "dur": 1.0, "args": {"seq": 1, "count": 4, "bytes": 16, "algo": "Ring"}}],
            "otherData": {"writer": "tutti", "rank": 0, "nranks": 1, "pid": 100, "comm": comm,
                          "host": "h", "realtime_minus_monotonic_ns": 0, "events": 1,
                          "dropped": 0}}
        path = os.path.join(work, "comm%d.json" % comm)
        with open(path, "w") as fh:
            json.dump(doc, fh)
        paths.append(path)
    merged_path = os.path.join(work, "two-comms.json")
    run([sys.executable, tool, "merge", "-o", merged_path] + paths)
    with open(merged_path) as fh:
        events = json.load(fh)["traceEvents"]
    pids = {e["pid"] for e in events if e.get("ph") == "X"}
    names = sorted(e["args"]["name"] for e in events if e.get("name") == "process_name")
    check(len(pids) == 2, "two communicators' rank 0 merged onto %d row(s)" % len(pids))
    check(names == ["rank 0, comm 1", "rank 0, comm 2"], "process names %s" % names)
    stats = run([sys.executable, tool, "stats", merged_path])
    rows = [line.split() for line in stats.splitlines() if "AllReduce" in line]
    check(sorted(r[-1] for r in rows) == ["1", "2"] and all(r[3] == "1" for r in rows),
          "stats rows for two communicators: %s" % rows)


if __name__ == "__main__":
    main()
