#!/usr/bin/python3
"""What a kill -9 costs the shipper in lines sent again, against the Loki double:

    JOBTRAIL_BUILD=build /usr/bin/python3 bench/kill9.py [LINES] [KILLS] [SEED] [LIFE_S]

LINES (default 300,000) numbered lines of about 60 bytes are written to one file at once; the
shipper is started, killed with SIGKILL KILLS times (default 10) at a random moment (0.3 to 2 s
after the stream made progress again; SEED, default 1, fixes the moments; LIFE_S instead: a crash
loop, each process killed that long after it started) and started again, then
left to finish. A line sent again after a kill is one Loki already had: the double counts it as a
duplicate and keeps it once. Printed per kill: lines stored when it died and lines sent again by
the next process (counted once the stream moved past where it was, so all of its re-sends are in);
then the median and maximum sent again per kill, and lines lost and duplicated in the store (both
must be 0). The shipper runs with its defaults for batches and pacing (max_stream_rate 512 KiB/s).
Needs root (the kmsg fixture of the test environment)."""
import json, os, random, statistics, sys, time, urllib.parse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/support"))
from jtsupport import Env, http  # noqa: E402


def stats(env):
    return json.loads(http("GET", env.url + "/-/stats")[1])


def newest(env):
    """The number of the newest line of the stream in Loki (lines go in order), -1 before any."""
    q = urllib.parse.urlencode({"query": '{job="big"}', "limit": 1, "direction": "backward",
                                "start": 0, "end": time.time_ns() + 60 * 10**9})
    res = json.loads(http("GET", env.url + "/loki/api/v1/query_range?" + q)[1])["data"]["result"]
    return int(res[0]["values"][0][1].split()[1]) if res else -1


def main(argv):
    lines = int(argv[0]) if argv else 300_000
    kills = int(argv[1]) if len(argv) > 1 else 10
    rnd = random.Random(int(argv[2]) if len(argv) > 2 else 1)
    life = float(argv[3]) if len(argv) > 3 else 0
    env = Env()
    try:
        env.edit_config(("  batch: {max_bytes: 256KiB, max_wait: 200ms}\n", ""))
        env.set_sources('{name: big, paths: ["%(d)s/logs/big.log"], job: big}')
        expected = ["line %07d %s" % (i, "x" * 46) for i in range(lines)]
        with open(env.dir + "/logs/big.log", "w") as f:
            f.write("".join(l + "\n" for l in expected))
        env.start()
        resent = []
        started = time.monotonic()
        last_dups = 0
        for k in range(kills):
            if life:
                time.sleep(max(0, started + life - time.monotonic()))
            else:
                time.sleep(rnd.uniform(0.3, 2.0))
            env.kill()
            stored, dups = newest(env) + 1, stats(env)["duplicates"]
            env.start()
            started = time.monotonic()
            if life:
                # A crash loop, no waiting for progress: each life's re-sends, counted at its end.
                if k:
                    resent.append(dups - last_dups)
                print("kill %2d: %7d lines stored when killed, %7d sent again by the life it ended"
                      % (k + 1, stored, dups - last_dups if k else 0), flush=True)
                last_dups = dups
                continue
            # Re-sends come first (one stream, oldest first): once a line past the newest is
            # stored, the next process has sent again all it will.
            deadline = time.monotonic() + 120
            while newest(env) + 1 <= stored < lines and time.monotonic() < deadline:
                time.sleep(0.02)
            again = stats(env)["duplicates"] - dups
            resent.append(again)
            print("kill %2d: %7d lines stored when killed, %7d sent again after it" % (k + 1, stored, again),
                  flush=True)
        deadline = time.monotonic() + 600
        while newest(env) + 1 < lines and time.monotonic() < deadline:
            time.sleep(0.2)
        got = env.store_lines("big")
        lost = len(set(expected) - set(got))
        dup = len(got) - len(set(got))
        print("lines %d, kills %d: sent again per kill median %d, max %d; lost %d, duplicated %d"
              % (lines, kills, statistics.median(resent or [0]), max(resent or [0]), lost, dup))
        return 0 if lost == 0 and dup == 0 else 1
    finally:
        env.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
