"""What the end-to-end tests and the benches share, written once: where the build and the sources
are, HTTP, a free port, the shipper's /metrics, the Loki test double in a process of its own (and
what it stored), and `Env`, one shipper with its own double, kmsg fixture and journal directory.

Import it with tests/support on sys.path (as skips.py). The shell benches start the double with
    read -r PID URL < <(/usr/bin/python3 tests/support/jtsupport.py loki-double DIR [DOUBLE ARGS...])
which leaves it running, its port file in DIR and its output in DIR/loki-double.log."""
import json, os, shutil, signal, socket, ssl, subprocess, sys, tempfile, threading, time, urllib.error, urllib.request

SRC = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "../.."))
BUILD = os.environ.get("JOBTRAIL_BUILD", os.path.join(SRC, "build"))
SHIPPER = os.path.join(BUILD, "shipper/jobtrail-shipper")
JOBTRAIL = os.path.join(BUILD, "cli/jobtrail")
PROLOG = os.path.join(BUILD, "prolog/jobtrail-prolog")
KMSGFS = os.path.join(BUILD, "tests/fixtures/kmsgfs/kmsgfs")
LOKI_DOUBLE = os.path.join(SRC, "tests/loki_double/loki_double.py")
# The double needs python3-snappy, installed for the system's Python (scripts/install-deps.sh).
PYTHON = "/usr/bin/python3"
JOURNAL_REMOTE = "/lib/systemd/systemd-journal-remote"
HAVE_JOURNAL = os.access(JOURNAL_REMOTE, os.X_OK)
JSON = {"Content-Type": "application/json"}


def http(method, url, body=None, headers=None, timeout=60):
    """(status, body) of one request; an error status is an answer, not an exception. HTTPS is not
    verified: these are the tests' own reads of the double, the shipper's TLS is what is tested."""
    req = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    ctx = ssl._create_unverified_context() if url.startswith("https") else None
    try:
        with urllib.request.urlopen(req, timeout=timeout, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def free_port():
    """A TCP port nobody listens on now (the kernel's choice), for a server that takes a port."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def scrape(port):
    """The shipper's /metrics on port as {series: value}, waiting up to 10 s for it to listen."""
    for _ in range(100):
        try:
            _, body = http("GET", "http://127.0.0.1:%d/metrics" % port)
            return {l.rsplit(" ", 1)[0]: float(l.rsplit(" ", 1)[1]) for l in body.splitlines()
                    if l and not l.startswith("#")}
        except OSError:
            time.sleep(0.1)
    raise AssertionError("no /metrics")


def run_sampled(cmd, timeout=None):
    """Runs cmd, sampling its open descriptors and VmHWM every 10 ms.
    Returns (returncode, stderr, peak fds, peak RSS KiB)."""
    p = subprocess.Popen(cmd, stderr=subprocess.PIPE)
    peak = {"fds": 0, "rss": 0}

    def sample():
        while p.poll() is None:
            try:
                peak["fds"] = max(peak["fds"], len(os.listdir("/proc/%d/fd" % p.pid)))
                with open("/proc/%d/status" % p.pid) as f:
                    for line in f:
                        if line.startswith("VmHWM:"):
                            peak["rss"] = max(peak["rss"], int(line.split()[1]))
            except OSError:
                pass
            time.sleep(0.01)

    t = threading.Thread(target=sample)
    t.start()
    _, err = p.communicate(timeout=timeout)
    t.join()
    return p.returncode, err.decode(errors="replace"), peak["fds"], peak["rss"]


class LokiDouble:
    """tests/loki_double/loki_double.py with args, listening on a port of its choice, which it
    writes to `port` in dir (a temporary directory of its own unless given; the file appears
    whole, by rename)."""

    def __init__(self, *args, scheme="http", dir=None, python=PYTHON, stdout=subprocess.DEVNULL, stderr=None):
        self.own_dir = dir is None
        self.dir = tempfile.mkdtemp(prefix="jobtrail-loki-") if dir is None else dir
        port_file = os.path.join(self.dir, "port")
        self.proc = subprocess.Popen([python, LOKI_DOUBLE, "--port-file", port_file] + list(args),
                                     stdout=stdout, stderr=stderr)
        for _ in range(500):
            if os.path.exists(port_file) or self.proc.poll() is not None:
                break
            time.sleep(0.02)
        if not os.path.exists(port_file):
            self.close()
            raise RuntimeError("the Loki double did not start (exit %s): %s" % (self.proc.returncode, args))
        with open(port_file) as f:
            self.url = scheme + "://127.0.0.1:" + f.read()

    def store(self):
        """Everything stored, exactly: [{"labels", "entries": [[ts, line, metadata]...]}]."""
        return json.loads(http("GET", self.url + "/-/store")[1])

    def store_lines(self, job):
        return [e[1] for s in self.store() if s["labels"].get("job") == job for e in s["entries"]]

    def fault(self, **kw):
        http("POST", self.url + "/-/fault", json.dumps(kw).encode())

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
        self.proc.wait()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


class Env:
    """One shipper (not started) with its own Loki double, kmsg fixture, log and journal
    directories and config, all under a temporary directory. Needs root (the FUSE mount)."""

    def __init__(self, loki_args=(), shipper_yaml="", scheme="http", loki_extra="", metrics=""):
        self.dir = tempfile.mkdtemp(prefix="jobtrail-e2e-")
        os.makedirs(self.dir + "/logs")
        os.makedirs(self.dir + "/mnt")
        os.makedirs(self.dir + "/journal")
        self.journal_files = 0
        self.fs = subprocess.Popen([KMSGFS, self.dir + "/mnt", "--ring-bytes", str(4 << 20)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.loki = LokiDouble(*loki_args, scheme=scheme, dir=self.dir)  # the fixture mounts meanwhile
        self.url = self.loki.url
        for _ in range(300):
            if os.path.exists(self.dir + "/mnt/ctl"):
                break
            time.sleep(0.02)
        with open(self.dir + "/cfg.yaml", "w") as f:
            f.write("""cluster: e2e
node: n1
collector:
  state_dir: %(d)s/state
  run_dir: %(d)s/run
  kmsg: %(d)s/mnt/kmsg
shipper:
  loki: {url: "%(url)s", timeout: 2s%(loki_extra)s}
  batch: {max_bytes: 256KiB, max_wait: 200ms}
  retry: {min_backoff: 50ms, max_backoff: 500ms}
  metrics: "%(metrics)s"
  sources:
    files:
      - {name: app, paths: ["%(d)s/logs/*.log"], job: app}
    journald: {units: [slurmd.service], directory: "%(d)s/journal"}
%(extra)s
""" % {"d": self.dir, "url": self.url, "extra": shipper_yaml, "loki_extra": loki_extra, "metrics": metrics})
        self.proc = None

    # The config's one file source until set_sources() replaces it.
    APP = '{name: app, paths: ["%(d)s/logs/*.log"], job: app}'

    def edit_config(self, *pairs):
        """Replaces each (old, new) text of the shipper's config; an old text that is not there
        fails the test (a silent no-op would test the default config instead)."""
        with open(self.dir + "/cfg.yaml") as f:
            cfg = f.read()
        for old, new in pairs:
            if old not in cfg:
                raise AssertionError("not in the config: %r" % old)
            cfg = cfg.replace(old, new)
        with open(self.dir + "/cfg.yaml", "w") as f:
            f.write(cfg)

    def set_sources(self, *sources):
        """The config's file sources: YAML flow mappings ("{name: ..., paths: [...], job: ...}",
        Env.APP for the default one), "%(d)s" standing for the environment's directory."""
        self.edit_config(("      - " + self.APP % {"d": self.dir},
                          "\n".join("      - " + s % {"d": self.dir} for s in sources)))

    def kmsg(self, lines):
        with open(self.dir + "/mnt/ctl", "w") as f:
            f.write("".join("6;%s\n" % l for l in lines))

    def journal(self, messages):
        """Appends entries as journald would, in a new journal file (as after a rotation)."""
        now = int(time.time() * 1e6)
        exp = "".join("__REALTIME_TIMESTAMP=%d\n__MONOTONIC_TIMESTAMP=%d\n_BOOT_ID=%s\n_SYSTEMD_UNIT=slurmd.service\n"
                      "PRIORITY=6\nMESSAGE=%s\n\n" % (now + i, now + i, "0" * 32, m) for i, m in enumerate(messages))
        self.journal_files += 1
        subprocess.run([JOURNAL_REMOTE, "-o", "%s/journal/r%03d.journal" % (self.dir, self.journal_files), "-"],
                       input=exp.encode(), check=True, stderr=subprocess.DEVNULL)

    def start(self):
        self.proc = subprocess.Popen([SHIPPER, "--config", self.dir + "/cfg.yaml"], stderr=subprocess.DEVNULL)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def once_cmd(self, timeout=120):
        return [SHIPPER, "--config", self.dir + "/cfg.yaml", "--once", "--once-timeout", str(timeout)]

    def once(self, timeout=120):
        return subprocess.run(self.once_cmd(timeout), stderr=subprocess.PIPE, timeout=timeout + 30)

    def fault(self, **kw):
        self.loki.fault(**kw)

    def store_lines(self, job):
        return self.loki.store_lines(job)

    def close(self):
        self.kill()
        self.loki.close()
        subprocess.run(["umount", "-l", self.dir + "/mnt"], stderr=subprocess.DEVNULL)
        self.fs.terminate()
        self.fs.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def wait_for_lines(env, job, pred, tries=100):
    """The double's lines of job once pred holds for them, polled every 0.1 s `tries` times."""
    for _ in range(tries):
        lines = env.store_lines(job)
        if pred(lines):
            return lines
        time.sleep(0.1)
    raise AssertionError("%s lines never matched: %s" % (job, env.store_lines(job)[:20]))


def with_prolog(env, script, replace):
    """Job logs under env.dir/slurm, written by a prolog that runs `script` (shell); the config's
    `replace` (old, new) applied too."""
    d = env.dir
    os.makedirs(d + "/slurm")
    with open(d + "/site.sh", "w") as f:
        f.write("#!/bin/sh\n%s\n" % script)
    os.chmod(d + "/site.sh", 0o755)
    with open(d + "/cfg.yaml") as f:
        cfg = f.read()
    cfg = cfg.replace("  state_dir:", "  log_dir: %s/slurm\n  prolog: {scripts: [%s/site.sh]}\n  state_dir:" % (d, d))
    with open(d + "/cfg.yaml", "w") as f:
        f.write(cfg.replace(*replace))


def main(argv):
    """loki-double DIR [ARGS...]: starts the double for a shell script and prints "PID URL"."""
    if len(argv) < 2 or argv[0] != "loki-double":
        sys.exit("usage: jtsupport.py loki-double DIR [DOUBLE ARGS...]")
    with open(os.path.join(argv[1], "loki-double.log"), "w") as log:
        loki = LokiDouble(*argv[2:], dir=argv[1], stdout=log, stderr=subprocess.STDOUT)
    print(loki.proc.pid, loki.url, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
