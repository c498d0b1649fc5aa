#!/usr/bin/python3
"""Identical lines and kernel records each get their own time, so Loki keeps every one, also
when a restart without its checkpoint sends them again.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import json, os, subprocess, sys, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import BUILD, Env, http, with_prolog  # noqa: E402


class Stamps(unittest.TestCase):
    def test_identical_lines_and_kernel_records_all_arrive_once(self):
        """A site script prints `ok` eight times in one write and the kernel prints one mlx5
        error three times in one microsecond: Loki keeps one entry per (stream, time, line), so
        each needs its own time. A restart without its checkpoint re-sends the same bytes."""
        env = Env()
        try:
            d = env.dir
            with_prolog(env, "printf 'ok\\nok\\nok\\nok\\nok\\nok\\nok\\nok\\n'",
                        ('      - {name: app, paths: ["%s/logs/*.log"], job: app}' % d,
                         '      - {name: jobs, paths: ["%s/slurm/prolog/*.log"], job: jobs, format: joblog}' % d))
            mlx = "mlx5_core 0000:5e:00.0: mlx5_cmd_out_err:838: ACCESS_REG(0x805) op_mod(0x1) failed"
            with open(d + "/mnt/ctl", "w") as f:
                f.write("3,7000000;%s\n" % mlx * 3)
            p = subprocess.run([os.path.join(BUILD, "prolog/jobtrail-prolog"), "--config", d + "/cfg.yaml"],
                               env=dict(os.environ, SLURM_JOB_ID="5151"), capture_output=True, timeout=60)
            self.assertEqual(p.returncode, 0, p.stderr)
            with open(d + "/slurm/prolog/5151.log") as f:
                stamps = [l.split(" ")[0] for l in f if " stdout[site.sh] ok" in l]
            self.assertEqual(len(stamps), 8)
            self.assertEqual(len(set(stamps)), 8, stamps)
            for attempt in range(2):
                r = env.once(60)
                self.assertEqual(r.returncode, 0, r.stderr.decode())
                ok = [l for l in env.store_lines("jobs") if l.endswith("stdout[site.sh] ok")]
                self.assertEqual(len(ok), 8, (attempt, ok))
                kernel = [l for l in env.store_lines("kmsg") if l == mlx]
                self.assertEqual(len(kernel), 3, (attempt, kernel))
                # The restart forgets where it was: everything is read and sent again.
                os.unlink(d + "/state/shipper-checkpoint.json")
            stats = json.loads(http("GET", env.url + "/-/stats")[1])
            self.assertGreaterEqual(stats["duplicates"], 11)  # re-sent, identical, dropped
        finally:
            env.close()


if __name__ == "__main__":
    skips.main()
