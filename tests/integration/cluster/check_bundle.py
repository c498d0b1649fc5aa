#!/usr/bin/env python3
"""What each node wrote against what `jobtrail bundle` got back from Loki: every line of the
node's prolog and epilog logs, of its NCCL files and every record of its kernel ring (the kmsg
fixture) is in the bundle exactly once, and nothing else is.
   check_bundle.py CLUSTER_DIR JOB_ID BUNDLE_TOP NODE..."""
import calendar, collections, errno, json, os, sys, time


def rfc3339_ns(t):
    # "2026-12-01T15:38:59.090453958Z"
    base, frac = t.rstrip("Z").split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) * 10**9 + int(frac.ljust(9, "0"))


def text_of(line):
    # "<RFC 3339 time> <rest>" as both the job logs and the bundle's files carry lines.
    return line.split(" ", 1)[1] if " " in line else ""


def lines(path):
    with open(path, "rb") as f:
        return [l.decode("utf-8", "replace") for l in f.read().split(b"\n") if l]


def ring(path, offset_ns, start_ns, end_ns):
    """The kmsg fixture's records as a reader from the start sees them (one per read), those
    whose time (the node's boot offset + the record's microseconds, as the shipper stamps
    them) is in the bundle's window."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    out = []
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        while True:
            try:
                rec = os.read(fd, 8192).decode("utf-8", "replace")
            except BlockingIOError:
                break
            except OSError as e:
                if e.errno == errno.EPIPE:
                    continue
                raise
            if not rec:
                break
            head, msg = rec.split("\n", 1)[0].split(";", 1)
            if start_ns <= offset_ns + int(head.split(",")[2]) * 1000 <= end_ns:
                out.append(msg)
    finally:
        os.close(fd)
    return out


def compare(what, want, got, problems):
    w, g = collections.Counter(want), collections.Counter(got)
    if not want:
        problems.append("%s: nothing on the node to compare" % what)
    for k in sorted(set(w) | set(g)):
        if w[k] != g[k]:
            problems.append("%s: %r on the node %d time(s), in the bundle %d" % (what, k, w[k], g[k]))


def main():
    d, job, top, nodes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    problems = []
    with open(os.path.join(top, "manifest.json")) as f:
        window = json.load(f)["window"]
    start_ns, end_ns = (rfc3339_ns(window[k]) for k in ("start", "end"))
    for n in nodes:
        nd = os.path.join(d, "nodes", n)
        for phase in ("prolog", "epilog"):
            local = ["%s %s" % (phase, text_of(l)) for l in lines(os.path.join(nd, "log", phase, job + ".log"))]
            got = os.path.join(top, "nodes", n, phase + ".log")
            compare("%s %s" % (n, phase), local, [text_of(l) for l in lines(got)] if os.path.exists(got) else [],
                    problems)
        ncdir = os.path.join(nd, "log", "nccl", job)
        files = sorted(f for f in os.listdir(ncdir) if f.endswith(".log") and not f.startswith("."))  # the glob
        bundled = sorted(os.listdir(os.path.join(top, "nccl", n))) if os.path.isdir(os.path.join(top, "nccl", n)) else []
        if files != bundled:
            problems.append("%s NCCL files: on the node %s, in the bundle %s" % (n, files, bundled))
        for f in files:
            got = os.path.join(top, "nccl", n, f)
            compare("%s nccl/%s" % (n, f), lines(os.path.join(ncdir, f)),
                    [text_of(l) for l in lines(got)] if os.path.exists(got) else [], problems)
        got = os.path.join(top, "nodes", n, "kmsg.log")
        with open(os.path.join(nd, "lib-jobtrail", "boot-offset")) as f:
            offset_ns = int(f.read().split()[1])
        compare("%s kmsg" % n, ring(os.path.join(nd, "kmsgfs", "kmsg"), offset_ns, start_ns, end_ns),
                [text_of(l) for l in lines(got)] if os.path.exists(got) else [], problems)
    for p in problems[:50]:
        print(p)
    if problems:
        print("%d difference(s)" % len(problems))
        return 1
    print("nodes %s: every prolog, epilog, NCCL and kernel line exactly once" % " ".join(nodes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
