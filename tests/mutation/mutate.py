#!/usr/bin/python3
"""Mutation run: how many small, realistic bugs put into lib/ the tests catch.

    python3 tests/mutation/mutate.py [-n 20] [--seed 1] [--sanitize] [--shards 4] [--only lib/x/] [--e2e tests.shipper.e2e_x ...]

Makes N mutants of lib/'s non-test .cpp files, chosen from every site of these changes with the
seed (another seed, other mutants): a comparison turned (== !=, < <=, > >=), a boolean condition
turned (&& ||, `if (!x)` -> `if (x)`), a boundary moved (+ 1 / - 1), a return value flipped
(true/false), a call or a `return;` removed. Each mutant is built in a throwaway copy of the tree
(tracked and untracked files, not ignored ones; under $MUTATE_DIR, default /var/tmp: put it under
ccache's base_dir to reuse the cache), incrementally: only the mutated file is compiled again, and
only the targets the tests run: a Debug build, or with --sanitize the build CI runs its tests in
(cmake/sanitize-build.cmake: ASan, UBSan and libstdc++'s assertions, which see a read past a
buffer that leaves the output as it was). It is judged by the unit tests, then, if it survives
them, by the end-to-end tests (default: tests/shipper/e2e_*.py and tests/cli/test_bundle.py;
--unit-only: none).

Both run side by side, as a 2-CPU machine allows for tests that mostly wait: the unit tests as
--shards processes, each a share of the cases balanced by their durations on the unmutated copy,
each stopping at its first failure; the e2e modules --e2e-shards at a time, the longest first,
none started once one failed. A failed case or module is run again alone to confirm it; one that
fails only beside the others is no kill (the whole suite is then run serially). Prints each mutant
with its seconds, then the kill rate, the mean seconds a mutant and every survivor's file:line and
change (one listed in equivalent.txt, shown to change nothing a user could observe, with its
reason, and the kill rate over the others too). A mutant that does not compile is said and not
counted. After each mutant, what its tests left running is killed and what they left mounted in
/tmp unmounted: run it alone, not beside other tests. The tree it is run from is only
read. Exits 1 if the unmutated copy fails its tests."""
import argparse, glob, html, os, random, re, shutil, signal, subprocess, sys, tempfile, time

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))

# (kind, text, replacement): binary operators as clang-format spaces them (template brackets,
# << and -> have no such spaces).
SWAPS = [
    ("comparison", " == ", " != "), ("comparison", " != ", " == "),
    ("comparison", " < ", " <= "), ("comparison", " <= ", " < "),
    ("comparison", " > ", " >= "), ("comparison", " >= ", " > "),
    ("condition", " && ", " || "), ("condition", " || ", " && "),
    ("condition", "if (!", "if ("),
    ("boundary", " + 1", " - 1"), ("boundary", " - 1", " + 1"),
    ("return", "return true;", "return false;"), ("return", "return false;", "return true;"),
]
# A statement that is only a call (`f(x);`, `a.b(c);`, `p->q();`), or a bare `return;`.
CALL = re.compile(r"^(\s*)((?:[A-Za-z_][\w:]*(?:\.|->))*[A-Za-z_][\w:]*\(.*\);|return;)\s*$")
NOT_CALL = re.compile(r"^\s*(return|if|for|while|switch|case|else|do|delete|throw|using|typedef|static_assert)\b")


def code_part(line):
    """The line without its // comment; None for a comment or preprocessor line."""
    s = line.strip()
    if not s or s.startswith(("//", "/*", "*", "#")):
        return None
    cut = line.find("//")
    return line if cut < 0 else line[:cut]


def outside_strings(line, col):
    return line[:col].count('"') % 2 == 0 and line[:col].count("'") % 2 == 0


def sites(src):
    """Every possible mutant: (path, line number, kind, line before, line after)."""
    out = []
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "lib"], cwd=src, check=True,
                           capture_output=True, text=True).stdout.split()
    for path in sorted(f for f in files if f.endswith(".cpp") and not f.endswith("_test.cpp")):
        with open(os.path.join(src, path)) as f:
            lines = f.read().split("\n")
        for i, line in enumerate(lines):
            code = code_part(line)
            if code is None:
                continue
            for kind, a, b in SWAPS:
                col = code.find(a)
                while col >= 0:
                    # A boundary moves by one: ` + 1` in `+ 10`, `+ 1'000` or `+ 1.5` is another number.
                    whole = kind != "boundary" or not re.match(r"[0-9'.]", code[col + len(a):col + len(a) + 1])
                    if outside_strings(code, col) and whole:
                        out.append((path, i + 1, kind, line, line[:col] + b + line[col + len(a):]))
                    col = code.find(a, col + 1)
            m = CALL.match(code)
            if m and not NOT_CALL.match(code) and "=" not in code.split("(")[0]:
                out.append((path, i + 1, "removed " + ("return" if m.group(2) == "return;" else "call"), line,
                            m.group(1) + ";"))
    return out


EQUIVALENT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "equivalent.txt")


def equivalents(path=EQUIVALENT):
    """{(file, line before, line after): why} of the mutants shown equivalent (equivalent.txt: an
    entry is the mutant as printed, `file: before  ->  after`, stripped; its reason on the next,
    indented line). Exits at an entry it cannot read, naming its line."""
    out, key = {}, None
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if not line.strip() or line.startswith("#"):
                continue
            if line[0] in " \t":
                if key is None or out[key]:
                    sys.exit("mutate: %s:%d: a reason without its mutant above it" % (path, n))
                out[key] = line.strip()
                continue
            if key is not None and not out[key]:
                sys.exit("mutate: %s:%d: the mutant above has no reason" % (path, n - 1))
            where, colon, change = line.rstrip("\n").partition(": ")
            before, arrow, after = change.partition("  ->  ")
            if not colon or not arrow or not where.startswith("lib/"):
                sys.exit("mutate: %s:%d: not `lib/<file>: <line before>  ->  <line after>`" % (path, n))
            key = (where, before.strip(), after.strip())
            out[key] = ""
    if key is not None and not out[key]:
        sys.exit("mutate: %s: its last mutant has no reason" % path)
    return out


LOG = None  # the last command's output


def sh(cmd, cwd, timeout=None, env=None, log=None):
    """Exit status, or "timeout" (the command's whole process group is then killed)."""
    with open(log or LOG, "w") as out:
        p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            return "timeout"


def reap(under):
    """Kills whatever still runs a program from `under` (a test's child that left its process
    group, which killpg misses); how many."""
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            if not os.readlink("/proc/%s/exe" % pid).startswith(under + "/"):
                continue
            os.kill(int(pid), signal.SIGKILL)
            n += 1
        except OSError:
            continue
    return n


def mount_ids():
    """{mount id: mount point} of this mount namespace."""
    with open("/proc/self/mountinfo") as f:
        return {int(fields[0]): fields[4] for fields in (line.split() for line in f)}


def unmount_left(before, work):
    """Unmounts (lazily) what the tests mounted since `before` (mount_ids()) in their temporary
    directories (/tmp, `work`) and left mounted: a shard that crashed or was killed at its timeout
    never ran its guard. How many."""
    n = 0
    left = [p for i, p in mount_ids().items() if i not in before and p.startswith(("/tmp/", work + "/"))]
    for point in sorted(left, key=len, reverse=True):  # one below another first
        for cmd in (["umount", "-l", point], ["fusermount3", "-uz", point]):
            try:
                if subprocess.run(cmd, capture_output=True).returncode == 0:
                    n += 1
                    break
            except OSError:
                continue
    return n


def tail(n=25, log=None):
    with open(log or LOG, errors="replace") as f:
        return "".join(f.readlines()[-n:])


def cases(xml_path):
    """(name, seconds, passed) of each test case in a Catch2 XML report, the last one perhaps
    unfinished (passed None) when the process died in it."""
    with open(xml_path, errors="replace") as f:
        text = f.read()
    out = []
    for m in re.finditer(r'<TestCase name="([^"]*)"', text):
        rest = text[m.end():]
        nxt = rest.find("<TestCase ")
        r = re.search(r'<OverallResult success="(true|false)"(?: durationInSeconds="([0-9.e+-]+)")?',
                      rest if nxt < 0 else rest[:nxt])
        out.append((html.unescape(m.group(1)), float(r.group(2) or 0) if r else 0.0,
                    (r.group(1) == "true") if r else None))
    return out


def balance(durations, n):
    """n lists of case names, the longest cases first each to the least loaded list."""
    shards = [[0.0, []] for _ in range(n)]
    for name, secs in sorted(durations, key=lambda d: -d[1]):
        s = min(shards, key=lambda s: s[0])
        s[0] += secs
        s[1].append(name)
    return [s[1] for s in shards if s[1]]


def write_names(path, names):
    """A file for Catch2's --input-file: a name per line, what would end or widen it escaped."""
    with open(path, "w") as f:
        f.write("".join(re.sub(r"([,\[\]*])", r"\\\1", n) + "\n" for n in names))


class Unit:
    """The unit test binary run as shards side by side."""

    def __init__(self, binary, work, shards, timeout, env):
        self.binary, self.work, self.n, self.timeout, self.env = binary, work, shards, timeout, env
        self.files = []
        self.why = ""
        self.last_failed = self.failed_log = None

    def plan(self, tree):
        """Runs the whole suite serially on the unmutated copy (it must pass), measuring each case,
        and splits the cases into shards; False if it failed."""
        xml = self.work + "/unit-all.xml"
        # Serially, the whole suite: the time of all the shards together.
        limit = self.timeout * self.n
        rc = sh([self.binary, "-r", "xml", "-d", "yes", "-o", xml], tree, limit, self.env)
        if rc not in (0, 77):
            failed = [n for n, _, ok in cases(xml) if not ok] if os.path.exists(xml) else []
            self.why = ("it ran past %d s (--unit-timeout %d x %d shards; a loaded machine: give more)" %
                        (limit, self.timeout, self.n) if rc == "timeout" else
                        "exit status %s; failed: %s" % (rc, "; ".join(failed) or "no case named"))
            return False
        durations = [(name, secs) for name, secs, _ in cases(xml)]
        names = set(n for n, _ in durations)
        if any(n.startswith("#") or re.search(r'[\\"]|^\s|\s$', n) for n in names):
            sys.exit("mutate: a test case name that Catch2's --input-file cannot select")
        for i, shard in enumerate(balance(durations, self.n)):
            path = "%s/shard-%d.txt" % (self.work, i)
            write_names(path, shard)
            self.files.append(path)
        listed = []
        for f in self.files:
            listed += subprocess.run([self.binary, "--list-test-names-only", "-f", f], capture_output=True,
                                     text=True).stdout.split("\n")
        if sorted(x.strip() for x in listed if x.strip()) != sorted(names):
            sys.exit("mutate: the shards do not select exactly the suite's test cases")
        return True

    def run(self, tree):
        """0 if every shard passed, else what failed: a case name, or a shard's exit status."""
        procs = []
        for i, names in enumerate(self.files):
            xml, log = "%s/shard-%d.xml" % (self.work, i), "%s/shard-%d.log" % (self.work, i)
            out = open(log, "w")
            procs.append((subprocess.Popen([self.binary, "-a", "-f", names, "-r", "xml", "-o", xml], cwd=tree,
                                           env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                           start_new_session=True), xml, out))
        deadline, failed = time.monotonic() + self.timeout, []
        for p, xml, out in procs:
            try:
                rc = p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                rc = "timeout"
            out.close()
            if rc not in (0, 77) and not failed:
                self.failed_log = log
            if rc == "timeout":
                failed.append(None)  # a hang: no case to run again
            elif rc not in (0, 77):
                bad = [c for c in (cases(xml) if os.path.exists(xml) else []) if c[2] is not True]
                failed.append(bad[0][0] if bad else rc)
        return failed[0] if failed else 0  # a case name, else None or an exit status

    def judge(self, tree):
        """'unit' if the mutant fails a unit test, else None."""
        failed = self.last_failed = self.run(tree)
        if failed == 0:
            return None
        if not isinstance(failed, str):
            return "unit"  # a shard hung, or crashed outside any case
        alone = self.work + "/alone.txt"
        write_names(alone, [failed])
        self.failed_log = None  # what follows is in LOG
        if sh([self.binary, "-f", alone], tree, self.timeout, self.env) not in (0, 77):
            return "unit"
        print("    (%s failed only beside the others: the whole suite serially)" % failed, flush=True)
        return "unit" if sh([self.binary], tree, self.timeout, self.env) not in (0, 77) else None


class E2E:
    """The end-to-end test modules, --e2e-shards of them side by side, the longest first."""

    def __init__(self, modules, work, shards, timeout, env):
        self.modules, self.work, self.n, self.timeout, self.env = list(modules), work, shards, timeout, env
        self.seconds = {}
        self.last_failed = None

    def run(self, tree, modules):
        """The first module that failed, or None; modules not started once one failed."""
        queue = sorted(modules, key=lambda m: -self.seconds.get(m, 0))
        running, failed, deadline = [], None, time.monotonic() + self.timeout
        while queue or running:
            while queue and failed is None and len(running) < self.n:
                m = queue.pop(0)
                out = open("%s/e2e-%s.log" % (self.work, m), "w")
                p = subprocess.Popen(["/usr/bin/python3", "-m", "unittest", "-f", m], cwd=tree, env=self.env,
                                     stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
                running.append((p, m, out, time.monotonic()))
            if failed is not None:
                queue = []
            time.sleep(0.2)
            for entry in list(running):
                p, m, out, start = entry
                rc = p.poll()
                if rc is None and time.monotonic() > deadline:
                    os.killpg(p.pid, signal.SIGKILL)
                    rc = p.wait()
                if rc is None:
                    continue
                running.remove(entry)
                out.close()
                self.seconds[m] = time.monotonic() - start
                if rc != 0 and failed is None:
                    failed = m
        return failed

    def judge(self, tree):
        """'e2e' if the mutant fails an end-to-end test, else None."""
        failed = self.last_failed = self.run(tree, self.modules)
        if failed is None:
            return None
        saved = self.n
        try:
            self.n = 1
            if self.run(tree, [failed]) is not None:
                return "e2e"
            print("    (%s failed only beside the others: every module serially)" % failed, flush=True)
            self.last_failed = self.run(tree, self.modules)
            return "e2e" if self.last_failed is not None else None
        finally:
            self.n = saved


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=20, help="mutants to judge (default 20)")
    ap.add_argument("--seed", type=int, default=1)
    # The e2e tests of CTest's e2e label that need no network: the shipper's and the CLI's bundle.
    e2e_modules = sorted("tests.shipper." + os.path.basename(f)[:-3]
                         for f in glob.glob(os.path.join(SRC, "tests/shipper/e2e_*.py"))) + ["tests.cli.test_bundle"]
    ap.add_argument("--e2e", nargs="*", default=e2e_modules,
                    help="unittest names run for survivors of the unit tests (default: tests/shipper/e2e_*.py and "
                         "tests/cli/test_bundle.py)")
    ap.add_argument("--unit-only", action="store_true", help="no end-to-end tests")
    ap.add_argument("--e2e-targets", default="jobtrail-shipper jobtrail jobtrail-prolog kmsgfs",
                    help="what the e2e tests need built")
    ap.add_argument("--jobs", type=int, default=2, help="build parallelism")
    ap.add_argument("--shards", type=int, default=4, help="unit test processes side by side (default 4)")
    ap.add_argument("--e2e-shards", type=int, default=3, help="e2e modules side by side (default 3)")
    ap.add_argument("--unit-timeout", type=int, default=None,
                    help="seconds for the unit tests; a mutant that hangs them is killed (default 180, 600 with "
                         "--sanitize: the whole suite in one process, as the first plan runs it, is slower there)")
    ap.add_argument("--e2e-timeout", type=int, default=900, help="seconds for the e2e tests")
    ap.add_argument("--sanitize", action="store_true",
                    help="judge in CI's sanitizer build (cmake/sanitize-build.cmake) instead of a Debug build")
    ap.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    ap.add_argument("--only", action="append", default=[], metavar="PREFIX",
                    help="mutate only files whose path starts so (lib/shipper/sources/file/, lib/spool/read.cpp); "
                         "repeatable. For closing the gaps of one part: a kill rate is a fresh seed's over lib/")
    ap.add_argument("--list", action="store_true",
                    help="print every site (of --only's files) as file:line: kind: before -> after, and build nothing")
    args = ap.parse_args()
    if args.unit_only:
        args.e2e = []
    if args.unit_timeout is None:
        args.unit_timeout = 600 if args.sanitize else 180

    candidates = [c for c in sites(SRC) if not args.only or any(c[0].startswith(o) for o in args.only)]
    if not candidates:
        sys.exit("mutate: no mutation site in a file under " + " or ".join(args.only))
    known = equivalents()
    stale = set(known) - {(c[0], c[3].strip(), c[4].strip()) for c in sites(SRC)}
    if stale and not args.list:
        print("mutate: %d entries of %s match no mutant of lib/ now (the code changed): %s" %
              (len(stale), os.path.relpath(EQUIVALENT, SRC), "; ".join("%s: %s" % (k[0], k[1]) for k in sorted(stale))))
    if args.list:
        for path, line_no, kind, before, after in candidates:
            print("%s:%d: %s: %s  ->  %s" % (path, line_no, kind, before.strip(), after.strip()))
        return
    random.Random(args.seed).shuffle(candidates)
    base = os.environ.get("MUTATE_DIR", "/var/tmp")
    work = tempfile.mkdtemp(prefix="jobtrail-mutate-", dir=base)
    if os.path.commonpath([os.path.realpath(work), SRC]) == SRC:
        sys.exit("mutate: MUTATE_DIR must be outside the tree it is run from")
    tree, build = work + "/src", work + "/src/build"
    global LOG
    LOG = work + "/last.log"
    print("mutate: seed %d, %d of %d sites, %s build, copy in %s" % (args.seed, args.n, len(candidates),
                                                                    "sanitizer" if args.sanitize else "Debug", tree),
          flush=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=SRC, check=True,
                           capture_output=True).stdout.split(b"\0")
    for f in (f.decode() for f in files if f):
        if os.path.isfile(os.path.join(SRC, f)) and not os.path.islink(os.path.join(SRC, f)):
            os.makedirs(os.path.dirname(os.path.join(tree, f)) or tree, exist_ok=True)
            shutil.copy2(os.path.join(SRC, f), os.path.join(tree, f))
    env = dict(os.environ, JOBTRAIL_BUILD=build)
    if args.sanitize:
        # As scripts/test.sh runs the tests: a leak, or any undefined behaviour, fails them.
        env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=0")
        env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    unit = Unit(build + "/tests/jobtrail_unit_tests", work, max(1, args.shards), args.unit_timeout, env)
    build_unit = ["cmake", "--build", build, "-j%d" % args.jobs, "--target", "jobtrail_unit_tests"]
    build_e2e = ["cmake", "--build", build, "-j%d" % args.jobs, "--target"] + args.e2e_targets.split()
    e2e = E2E(args.e2e, work, max(1, args.e2e_shards), args.e2e_timeout, env)

    phase = {}

    def judge():
        """'unit', 'e2e' (what killed it), None (survived) or 'build' (did not compile)."""
        if sh(build_unit, tree) != 0:
            return "build"
        if unit.judge(tree):
            return "unit"
        if args.e2e:
            phase["e2e from"] = time.monotonic()
            if sh(build_e2e, tree) != 0:
                return "build"
            if e2e.judge(tree):
                return "e2e"
        return None

    try:
        flavour = ["-C", tree + "/cmake/sanitize-build.cmake"] if args.sanitize else ["-DCMAKE_BUILD_TYPE=Debug"]
        if sh(["cmake", "-S", tree, "-B", build] + flavour + ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
                                                             "-DCMAKE_C_COMPILER_LAUNCHER=ccache"], tree) != 0:
            sys.exit("mutate: cmake failed in " + tree + ":\n" + tail())
        if sh(build_unit, tree) != 0 or (args.e2e and sh(build_e2e, tree) != 0):
            sys.exit("mutate: the unmutated tree does not build:\n" + tail())
        if not unit.plan(tree):
            sys.exit("mutate: the unmutated tree fails its unit tests (" + unit.why + "): nothing can be judged")
        # Judged as a mutant is: a case or module that fails only beside the others is run again.
        if unit.judge(tree):
            what = (unit.last_failed if isinstance(unit.last_failed, str) else
                    "a shard hung past --unit-timeout" if unit.last_failed is None else
                    "a shard crashed outside any case, exit status %s" % unit.last_failed)
            sys.exit("mutate: the unmutated tree fails its unit tests (%s): nothing can be judged:\n%s" %
                     (what, tail(log=unit.failed_log)))
        if args.e2e and e2e.judge(tree):
            sys.exit("mutate: the unmutated tree fails the end-to-end module %s: nothing can be judged:\n%s" %
                     (e2e.last_failed, tail(log="%s/e2e-%s.log" % (e2e.work, e2e.last_failed))))
        judged, killed, survivors, stillborn, seconds = 0, {"unit": 0, "e2e": 0}, [], 0, 0.0
        for path, line_no, kind, before, after in candidates:
            if judged == args.n:
                break
            full = os.path.join(tree, path)
            with open(full) as f:
                original = f.read()
            lines = original.split("\n")
            lines[line_no - 1] = after
            with open(full, "w") as f:
                f.write("\n".join(lines))
            start, mounted = time.monotonic(), mount_ids()
            phase.clear()
            try:
                verdict = judge()
            finally:
                with open(full, "w") as f:
                    f.write(original)
                if reap(work):
                    print("  (processes this mutant left running were killed)", flush=True)
                if unmount_left(mounted, work):
                    print("  (mounts this mutant's tests left were unmounted)", flush=True)
            took = time.monotonic() - start
            if "e2e from" in phase:
                took_s = "%.0f s: %.0f s build and unit, %.0f s e2e" % (took, phase["e2e from"] - start,
                                                                      start + took - phase["e2e from"])
            else:
                took_s = "%.0f s" % took
            where = "%s:%d: %s: %s  ->  %s" % (path, line_no, kind, before.strip(), after.strip())
            if verdict == "build":
                stillborn += 1
                print("  not compiled  %s (%s)" % (where, took_s), flush=True)
                continue
            judged += 1
            seconds += took
            if verdict:
                killed[verdict] += 1
                print("  killed (%s)  %s (%s)" % (verdict, where, took_s), flush=True)
            else:
                why = known.get((path, before.strip(), after.strip()))
                survivors.append((where, why))
                print("  SURVIVED     %s (%s)%s" % (where, took_s, "; known equivalent: " + why if why else ""),
                      flush=True)
        total = killed["unit"] + killed["e2e"]
        pct = lambda k: 100.0 * k / max(1, judged)
        print("mutate: seed %d: %d of %d mutants killed (%.0f%%): %d by the unit tests (%.0f%%), %d more by "
              "e2e; %d did not compile; %.0f s a mutant" % (args.seed, total, judged, pct(total), killed["unit"],
                                                           pct(killed["unit"]), killed["e2e"], stillborn,
                                                           seconds / max(1, judged)))
        equivalent = sum(1 for _, why in survivors if why)
        if equivalent:
            print("mutate: %d of the %d survivors are known equivalent (%s): %d of the other %d mutants killed "
                  "(%.0f%%)" % (equivalent, len(survivors), os.path.relpath(EQUIVALENT, SRC), total,
                                judged - equivalent, 100.0 * total / max(1, judged - equivalent)))
        for where, why in survivors:
            print("survivor: " + where + ("\n    known equivalent: " + why if why else ""))
    finally:
        if args.keep:
            print("mutate: copy kept in " + tree)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
