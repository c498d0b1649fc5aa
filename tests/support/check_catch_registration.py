#!/usr/bin/python3
"""Every Catch2 case of the unit test binary is a CTest test that runs exactly that case.

catch_discover_tests splits names at ';' and Catch2 reads '\\' (and more) in a test spec, so a
name can be registered as one that matches nothing (Catch2 then says "No tests ran" and, without
--warn NoTests, exits 0: a lost case reported as passed). This compares the case list of the
binary with what CTest registered, and asks the binary which cases each registered command
selects: exactly its own, every time.

usage: check_catch_registration.py <unit test binary> <ctest> <build dir>"""
import concurrent.futures, json, os, subprocess, sys


def main():
    binary, ctest, build = sys.argv[1:4]
    binary = os.path.realpath(binary)
    listed = subprocess.run([binary, "--list-test-names-only"], capture_output=True, text=True).stdout
    cases = [l for l in listed.split("\n") if l]
    problems = []
    if len(set(cases)) != len(cases):
        problems.append("duplicate case names: %s" % sorted({c for c in cases if cases.count(c) > 1}))
    shown = subprocess.run([ctest, "--test-dir", build, "--show-only=json-v1"], capture_output=True, text=True,
                           check=True).stdout
    tests = [t for t in json.loads(shown)["tests"]
             if t.get("command") and os.path.realpath(t["command"][0]) == binary]
    registered = [t["name"] for t in tests]
    for c in sorted(set(cases) - set(registered)):
        problems.append("Catch2 case not registered in CTest under its name: %r" % c)
    for n in sorted(set(registered) - set(cases)):
        problems.append("CTest test that is no Catch2 case: %r" % n)

    def props(t):
        return {p["name"]: p["value"] for p in t.get("properties", [])}

    for t in tests:
        cmd, p = t["command"], props(t)
        if "--warn" not in cmd or cmd[cmd.index("--warn") + 1:cmd.index("--warn") + 2] != ["NoTests"]:
            problems.append("%r runs without --warn NoTests (a spec matching nothing would pass)" % t["name"])
        if p.get("SKIP_RETURN_CODE") != 77:
            problems.append("%r has no SKIP_RETURN_CODE 77 (a skip would read as a pass)" % t["name"])

    def selects(t):
        out = subprocess.run(t["command"] + ["--list-test-names-only"], capture_output=True, text=True,
                             cwd=t.get("properties") and props(t).get("WORKING_DIRECTORY") or build).stdout
        return t["name"], [l for l in out.split("\n") if l]

    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        for name, got in pool.map(selects, tests):
            if got != [name]:
                problems.append("CTest test %r runs %r" % (name, got))
    for p in problems:
        print("FAIL:", p)
    print("%d Catch2 cases, %d registered in CTest, %d problems" % (len(cases), len(registered), len(problems)))
    return 1 if problems or not cases else 0


if __name__ == "__main__":
    sys.exit(main())
