#!/usr/bin/python3
"""jobtrail-shipper on what a job user can put in its way: a file name that is not UTF-8, ten
thousand files in one job directory, each shipped once with bounded descriptors.
Needs JOBTRAIL_BUILD (the build directory) and root (kmsg fixture)."""
import os, sys, unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import Env, run_sampled  # noqa: E402


class HostileInput(unittest.TestCase):
    def test_a_file_name_that_is_not_utf8_never_stops_the_shipper(self):
        """A user's `\\xff.log` once made the checkpoint unwritable and the shipper abort on every
        restart, kmsg included. It must keep shipping that file, the others and the kernel's."""
        env = Env()
        try:
            bad = env.dir.encode() + b"/logs/\xff\xfe.log"
            with open(bad, "wb") as f:
                f.write(b"from the odd name\n")
            with open(env.dir + "/logs/plain.log", "w") as f:
                f.write("from the plain name\n")
            env.kmsg(["kernel before restart"])
            for rnd in range(3):  # the checkpoint is written, read back and written again
                r = env.once(60)
                self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
                with open(bad, "ab") as f:
                    f.write(b"odd again %d\n" % rnd)
                env.kmsg(["kernel after restart %d" % rnd])
            r = env.once(60)
            self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace"))
            app = env.store_lines("app")
            self.assertEqual(sorted(app), sorted(["from the odd name", "from the plain name", "odd again 0",
                                                  "odd again 1", "odd again 2"]))
            kmsg = [l for l in env.store_lines("kmsg") if l.startswith("kernel ")]
            self.assertEqual(sorted(kmsg), sorted(["kernel before restart"] +
                                                  ["kernel after restart %d" % i for i in range(3)]))
        finally:
            env.close()

    def test_ten_thousand_files_in_one_job_directory_are_bounded_and_nothing_is_duplicated(self):
        env = Env(shipper_yaml="")
        try:
            d = env.dir
            os.makedirs(d + "/nccl/77")
            for i in range(10000):
                with open(d + "/nccl/77/0.n1.%d.log" % i, "w") as f:
                    f.write("rank %d says hello\n" % i)
            with open(d + "/logs/app.log", "w") as f:
                f.write("the other logs still ship\n")
            env.set_sources(env.APP, '{name: nccl, paths: ["%(d)s/nccl/*/*.log"], job: nccl, format: nccl}')
            for _ in range(2):  # and again after a restart: still nothing twice
                r = env.once(120)
                self.assertEqual(r.returncode, 0, r.stderr.decode(errors="replace")[-2000:])
            nccl = env.store_lines("nccl")
            self.assertEqual(len(nccl), 512)  # the default max_files_per_dir
            self.assertEqual(len(set(nccl)), 512)
            self.assertEqual(env.store_lines("app"), ["the other logs still ship"])
            said = r.stderr.decode(errors="replace")
            # Said of the directory, once: it is not even listed past its cap.
            self.assertEqual(said.count("not reading more files of %s/nccl/77: over the limit of 512 files in one "
                                        "directory" % d), 1)
            print("peak RSS of the shipper runs (KiB, ASan included): %d"
                  % __import__("resource").getrusage(__import__("resource").RUSAGE_CHILDREN).ru_maxrss)
        finally:
            env.close()

    def test_ten_thousand_tracked_files_hold_bounded_descriptors_and_arrive_once(self):
        """Every one of a job user's 10,000 files tracked (the caps raised past them): once each
        shipper held a descriptor per file; now idle files are closed and opened again, so the
        descriptors stay under max_open_files, and each line still arrives once, across a
        restart and a second line in every file."""
        env = Env()
        try:
            d = env.dir
            job = d + "/nccl/77"
            os.makedirs(job)
            os.chown(job, 65534, 65534)  # the job user's directory and files, as on a node
            names = [job + "/0.n1.%d.log" % i for i in range(10000)]
            for i, p in enumerate(names):
                with open(p, "w") as f:
                    f.write("rank %d first\n" % i)
                os.chown(p, 65534, 65534)
            env.set_sources(env.APP, '{name: nccl, paths: ["%(d)s/nccl/*/*.log"], job: nccl, format: nccl,\n'
                                     '         max_files: 20000, max_files_per_dir: 20000, max_files_per_owner: 20000}')
            peaks = []
            for rnd in range(2):
                if rnd:
                    for i, p in enumerate(names):
                        with open(p, "a") as f:
                            f.write("rank %d second\n" % i)
                rc, err, fds, rss = once_sampled(env)
                self.assertEqual(rc, 0, err[-2000:])
                peaks.append((fds, rss))
                # max_open_files (256) for the NCCL files, plus the shipper's own few
                self.assertLess(fds, 256 + 64, "open descriptors while shipping 10,000 files")
            nccl = env.store_lines("nccl")
            self.assertEqual(len(nccl), 20000)
            self.assertEqual(len(set(nccl)), 20000, "a line arrived twice")
            self.assertEqual(set(nccl), {"rank %d %s" % (i, w) for i in range(10000) for w in ("first", "second")})
            for rnd, (fds, rss) in enumerate(peaks):
                print("10,000 tracked files, run %d: peak %d open fds, peak RSS %.1f MiB (this build; "
                      "bench/shipper_files.py for a Release figure)" % (rnd + 1, fds, rss / 1024))
        finally:
            env.close()


def once_sampled(env, timeout=120):
    """env.once(), sampling the shipper's open descriptors and VmHWM every 10 ms while it runs.
    Returns (returncode, stderr, peak fds, peak RSS KiB)."""
    return run_sampled(env.once_cmd(timeout), timeout=timeout + 30)


if __name__ == "__main__":
    skips.main()
