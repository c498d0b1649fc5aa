#!/usr/bin/python3
"""Mutation run: how many small, realistic bugs put into lib/ the tests catch.

    python3 tests/mutation/mutate.py [-n 20] [--seed 1] [--e2e tests.shipper.e2e_loki_answers ...]

Makes N mutants of lib/'s non-test .cpp files, chosen from every site of these changes with the
seed (another seed, other mutants): a comparison turned (== !=, < <=, > >=), a boolean condition
turned (&& ||, `if (!x)` -> `if (x)`), a boundary moved (+ 1 / - 1), a return value flipped
(true/false), a call or a `return;` removed. Each mutant is built in a throwaway copy of the tree
(tracked and untracked files, not ignored ones; under $MUTATE_DIR, default /var/tmp: put it under
ccache's base_dir to reuse the cache), incrementally, and judged by the unit tests, then, if it
survives them, by the named end-to-end tests. Prints each mutant, then the kill rate and every
survivor's file:line and change. A mutant that does not compile is said and not counted. The tree
it is run from is only read. Exits 1 if the unmutated copy fails its tests."""
import argparse, os, random, re, shutil, subprocess, sys, tempfile

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
                    if outside_strings(code, col):
                        out.append((path, i + 1, kind, line, line[:col] + b + line[col + len(a):]))
                    col = code.find(a, col + 1)
            m = CALL.match(code)
            if m and not NOT_CALL.match(code) and "=" not in code.split("(")[0]:
                out.append((path, i + 1, "removed " + ("return" if m.group(2) == "return;" else "call"), line,
                            m.group(1) + ";"))
    return out


LOG = None  # the last command's output


def sh(cmd, cwd, timeout=None, env=None):
    with open(LOG, "w") as log:
        try:
            return subprocess.run(cmd, cwd=cwd, env=env, timeout=timeout, stdout=log, stderr=subprocess.STDOUT).returncode
        except subprocess.TimeoutExpired:
            return "timeout"


def tail(n=25):
    with open(LOG, errors="replace") as f:
        return "".join(f.readlines()[-n:])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=20, help="mutants to judge (default 20)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--e2e", nargs="*", default=[], help="unittest names run for survivors of the unit tests")
    ap.add_argument("--e2e-targets", default="jobtrail-shipper jobtrail jobtrail-prolog kmsgfs",
                    help="what the e2e tests need built")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--unit-timeout", type=int, default=900, help="seconds; a mutant that hangs them is killed")
    ap.add_argument("--e2e-timeout", type=int, default=1800)
    ap.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    args = ap.parse_args()

    candidates = sites(SRC)
    random.Random(args.seed).shuffle(candidates)
    base = os.environ.get("MUTATE_DIR", "/var/tmp")
    work = tempfile.mkdtemp(prefix="jobtrail-mutate-", dir=base)
    if os.path.commonpath([os.path.realpath(work), SRC]) == SRC:
        sys.exit("mutate: MUTATE_DIR must be outside the tree it is run from")
    tree, build = work + "/src", work + "/src/build"
    global LOG
    LOG = work + "/last.log"
    print("mutate: seed %d, %d of %d sites, copy in %s" % (args.seed, args.n, len(candidates), tree), flush=True)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=SRC, check=True,
                           capture_output=True).stdout.split(b"\0")
    for f in (f.decode() for f in files if f):
        if os.path.isfile(os.path.join(SRC, f)) and not os.path.islink(os.path.join(SRC, f)):
            os.makedirs(os.path.dirname(os.path.join(tree, f)) or tree, exist_ok=True)
            shutil.copy2(os.path.join(SRC, f), os.path.join(tree, f))
    env = dict(os.environ, JOBTRAIL_BUILD=build)
    unit = [build + "/tests/jobtrail_unit_tests"]
    build_unit = ["cmake", "--build", build, "-j%d" % args.jobs, "--target", "jobtrail_unit_tests"]
    build_e2e = ["cmake", "--build", build, "-j%d" % args.jobs, "--target"] + args.e2e_targets.split()
    e2e = ["/usr/bin/python3", "-m", "unittest"] + args.e2e

    def judge():
        """'unit', 'e2e' (what killed it), None (survived) or 'build' (did not compile)."""
        if sh(build_unit, tree) != 0:
            return "build"
        if sh(unit, tree, args.unit_timeout, env) != 0:
            return "unit"
        if args.e2e:
            if sh(build_e2e, tree) != 0:
                return "build"
            if sh(e2e, tree, args.e2e_timeout, env) != 0:
                return "e2e"
        return None

    try:
        if sh(["cmake", "-S", tree, "-B", build, "-DCMAKE_BUILD_TYPE=Debug", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache",
               "-DCMAKE_C_COMPILER_LAUNCHER=ccache"], tree) != 0:
            sys.exit("mutate: cmake failed in " + tree + ":\n" + tail())
        first = judge()
        if first is not None:
            sys.exit("mutate: the unmutated tree fails (%s): nothing can be judged:\n%s" % (first, tail()))
        judged, killed, survivors, stillborn = 0, 0, [], 0
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
            try:
                verdict = judge()
            finally:
                with open(full, "w") as f:
                    f.write(original)
            where = "%s:%d: %s: %s  ->  %s" % (path, line_no, kind, before.strip(), after.strip())
            if verdict == "build":
                stillborn += 1
                print("  not compiled  " + where, flush=True)
                continue
            judged += 1
            if verdict:
                killed += 1
                print("  killed (%s)  %s" % (verdict, where), flush=True)
            else:
                survivors.append(where)
                print("  SURVIVED     " + where, flush=True)
        print("mutate: seed %d: %d of %d mutants killed (%.0f%%); %d did not compile" %
              (args.seed, killed, judged, 100.0 * killed / max(1, judged), stillborn))
        for s in survivors:
            print("survivor: " + s)
    finally:
        if args.keep:
            print("mutate: copy kept in " + tree)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
