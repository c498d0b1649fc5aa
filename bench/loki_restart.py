#!/usr/bin/python3
"""How long a Loki restart holds the shipper back, against the Loki double under a 64 KB/s
per-stream limit (the "perstream" Loki of ../shared/reference/loki3-observed-responses.md):

    JOBTRAIL_BUILD=build /usr/bin/python3 bench/loki_restart.py [RUNS] [LIMIT_S]

A stream is seeded, Loki restarts (the double's /-/restart: the first per-stream refusal of a
stream it had names "(limit: 8EB/sec)", reference section 12), then 3,000 lines (300 KB) are
written at once to that stream and 50 to another over 5 s. Printed per run: seconds from the
restart to the burst's first and last line stored, the rate the burst went at, when the trickle
was all in, and the lines counted in Loki (each once) or, past LIMIT_S (default 120 s), how many
had arrived. The shipper runs with its default retry (min_backoff 500 ms, max_backoff 5 m).
Needs root (the kmsg fixture of the test environment)."""
import os, sys, time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/support"))
from jtsupport import Env, http  # noqa: E402

BURST, TRICKLE, LINE = 3000, 50, 100


def configure(env):
    env.edit_config(("  retry: {min_backoff: 50ms, max_backoff: 500ms}\n", ""))
    env.set_sources('{name: burst, paths: ["%(d)s/logs/burst.log"], job: burst}',
                    '{name: trickle, paths: ["%(d)s/logs/trickle.log"], job: trickle}')


def run_once(limit_s):
    env = Env(loki_args=["--per-stream-rate-kb", "64", "--per-stream-burst-kb", "64"])
    try:
        configure(env)
        with open(env.dir + "/logs/burst.log", "w") as f:
            f.write("seed\n")
        env.start()
        while env.store_lines("burst") != ["seed"]:
            time.sleep(0.05)
        http("POST", env.url + "/-/restart", b"")
        t0 = time.monotonic()
        burst = ["burst %04d %s" % (i, "b" * (LINE - 11)) for i in range(BURST)]
        with open(env.dir + "/logs/burst.log", "a") as f:
            f.write("".join(l + "\n" for l in burst))
        first = last = trickle_done = None
        written = 0
        while time.monotonic() - t0 < limit_s:
            now = time.monotonic() - t0
            if written < TRICKLE and now >= written * 0.1:
                with open(env.dir + "/logs/trickle.log", "a") as f:
                    f.write("trickle %d\n" % written)
                written += 1
            got = len(env.store_lines("burst")) - 1
            if got > 0 and first is None:
                first = now
            if trickle_done is None and written == TRICKLE and len(env.store_lines("trickle")) >= TRICKLE:
                trickle_done = now
            if got >= BURST and trickle_done is not None:
                last = now
                break
            time.sleep(0.05)
        lines = env.store_lines("burst")
        trickle = env.store_lines("trickle")
        return {"first": first, "last": last, "trickle": trickle_done, "burst": len(lines) - 1,
                "burst_unique": len(set(lines)) - 1, "trickle_n": len(trickle)}
    finally:
        env.close()


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    limit_s = float(sys.argv[2]) if len(sys.argv) > 2 else 120
    fmt = lambda v: "%.1f" % v if v is not None else "-"
    print("run  first_line_s  all_burst_s  burst_rate_KB/s  trickle_all_s  burst_in_loki  trickle_in_loki")
    for i in range(runs):
        r = run_once(limit_s)
        rate = BURST * LINE / 1024 / (r["last"] - r["first"]) if r["last"] and r["last"] > r["first"] else None
        print("%3d  %12s  %11s  %15s  %13s  %7d/%d%s  %9d/%d" % (
            i + 1, fmt(r["first"]), fmt(r["last"]) if r["last"] else "> %d" % limit_s, fmt(rate),
            fmt(r["trickle"]), r["burst"], BURST, "" if r["burst_unique"] == r["burst"] else " (dups!)",
            r["trickle_n"], TRICKLE))


if __name__ == "__main__":
    main()
