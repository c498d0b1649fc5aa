#!/usr/bin/python3
"""jobtrail-shipper --check-config: each bad value fails naming file:line and key, the documented
off values pass.
Needs JOBTRAIL_BUILD (the build directory)."""
import os, re, shutil, subprocess, sys, tempfile, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import SHIPPER  # noqa: E402


class CheckConfig(unittest.TestCase):
    """--check-config is what an operator runs after an edit: each value that would fail later
    (a label Loki refuses, a port that is none, an overflowing timeout) fails it now, naming
    file:line and key."""

    def check(self, yaml):
        d = tempfile.mkdtemp(prefix="jobtrail-check-")
        try:
            path = d + "/jobtrail.yaml"
            with open(path, "w") as f:
                f.write(yaml)
            r = subprocess.run([SHIPPER, "--check-config", "--config", path], capture_output=True, timeout=30)
            return r.returncode, r.stderr.decode(), path
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def test_each_bad_value_fails_with_file_line_and_key(self):
        rc, err, path = self.check("""shipper:
  metrics: "127.0.0.1:notaport"
  spool: {max_size: 1}
  sources:
    files:
      - {paths: [/var/log/a.log], job: a, labels: {bad-name: x, node: other}}
      - {paths: [/var/log/b.log], job: b, max_files_per_owner: 0, max_open_files: 0, idle_close: 1ms, max_partial_bytes: 1}
  stages:
    drop:
      - {name: broken, pattern: "(unclosed"}
    nccl_budget: {bytes: 1KiB, window: 2h}
  batch: {max_in_flight: 0}
collector:
  prolog:
    total_timeout: 106752d
""")
        self.assertNotEqual(rc, 0, err)
        for line, key in [(2, "shipper.metrics"), (3, "shipper.spool.max_size"),
                          (6, "shipper.sources.files[0].labels.bad-name"),
                          (6, "shipper.sources.files[0].labels.node"),
                          (7, "shipper.sources.files[1].max_files_per_owner"),
                          (7, "shipper.sources.files[1].max_open_files"),
                          (7, "shipper.sources.files[1].idle_close"),
                          (7, "shipper.sources.files[1].max_partial_bytes"),
                          (10, "shipper.stages.drop[0].pattern"), (11, "shipper.stages.nccl_budget.bytes"),
                          (11, "shipper.stages.nccl_budget.window"), (12, "shipper.batch.max_in_flight"),
                          (15, "collector.prolog.total_timeout")]:
            self.assertRegex(err, r"%s:%d:\d+: key '%s'" % (re.escape(path), line, re.escape(key)), err)
        self.assertIn("missing )", err)  # RE2's reason

    def test_documented_off_values_pass(self):
        rc, err, _ = self.check('shipper:\n  metrics: ""\n  heartbeat: 0\n  stages: {nccl_budget: {bytes: 0}}\n')
        self.assertEqual(rc, 0, err)


if __name__ == "__main__":
    skips.main()
