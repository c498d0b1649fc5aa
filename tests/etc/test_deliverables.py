#!/usr/bin/python3
"""What operators install besides the binaries: every YAML and JSON file parses, every LogQL
expression (alert rules, dashboard, README cookbook, the CLI's) parses with Grafana's own grammar
and uses only labels and metadata the shipper produces, the alert rules' Xid list is the
catalogue's, the maintainer scripts never touch slurmd, the docker demo's files and paths exist
(in the repository or in the packages), and its Loki has the Helm values' limits.
Needs JOBTRAIL_BUILD; JOBTRAIL_DEBS (a directory with the .deb files) for the package checks."""
import glob, json, os, re, subprocess, sys, tempfile, unittest

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import JOBTRAIL, SHIPPER, SRC  # noqa: E402

DEBS = os.environ.get("JOBTRAIL_DEBS", "")
JS = os.path.join(SRC, "tests/js")

# What the shipper produces (design.md): stream labels, then structured metadata.
LABELS = {"cluster", "node", "job", "job_id", "unit", "priority", "service_name", "namespace", "pod", "container"}
METADATA = {"seq", "subsystem", "device", "xid", "sxid", "pci_bdf", "event", "severity", "slurm_job_id",
            "slurm_jobs_running", "attribution", "gpu", "file",
            "step", "pid", "phase", "tag", "stream", "pod_uid"}
JOBS = {"kmsg", "slurm-prolog-epilog", "nccl", "systemd-journal", "fabric-manager", "jobtrail-shipper",
        "kubernetes-pods", "dcgm"}
GRAFANA_VARS = {"$__auto": "5m", "$__interval": "1m", "$__range": "1h", "$job_id": "4242", "$cluster": ".+",
                "$job_nodes": ".+"}


def src(*p):
    return os.path.join(SRC, *p)


def parse_logql(queries):
    """[{logql, ok, error, labels}] from tests/js/check-logql.mjs (Grafana's lezer grammar)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(queries, f)
    try:
        r = subprocess.run(["node", os.path.join(JS, "check-logql.mjs"), f.name], capture_output=True, text=True,
                           timeout=120)
        return json.loads(r.stdout)
    finally:
        os.unlink(f.name)


def grafana_expand(q):
    for k in sorted(GRAFANA_VARS, key=len, reverse=True):
        q = q.replace(k, GRAFANA_VARS[k])
    return q


def rule_queries():
    doc = yaml.safe_load(open(src("etc/loki/rules/jobtrail-alerts.yaml")))
    return [(r["alert"], r["expr"].strip()) for g in doc["groups"] for r in g["rules"]]


def dashboard():
    return json.load(open(src("etc/grafana/dashboards/jobtrail.json")))


def dashboard_queries():
    d = dashboard()
    out = []
    for p in d["panels"]:
        if p.get("datasource", {}).get("type") != "loki":
            continue
        for t in p.get("targets", []):
            out.append((p["title"], grafana_expand(t["expr"])))
    for a in d["annotations"]["list"]:
        if a.get("datasource", {}).get("type") == "loki":
            out.append(("annotation " + a["name"], grafana_expand(a["expr"])))
    for v in d["templating"]["list"]:
        m = re.fullmatch(r"label_values\((\{.*\}),\s*(\w+)\)", v.get("query", "") or "")
        if m:
            out.append(("variable " + v["name"], grafana_expand(m.group(1))))
    return out


def readme_queries():
    text = open(src("README.md")).read()
    return [("README", q.strip()) for q in re.findall(r"```logql\n(.*?)```", text, re.S)]


def kmsg_line_filters(q):
    """The line filters (|= and |~, with their text) of every {job="kmsg"...} selector in q."""
    out = []
    for m in re.finditer(r'\{[^{}]*\bjob\s*=\s*"kmsg"[^{}]*\}((?:\s*(?:\|=|\|~|!=|!~|\|[^=~])\s*(?:"(?:[^"\\]|\\.)*"|`[^`]*`|[^|\[)]*))*)', q):
        for op, lit in re.findall(r'(\|=|\|~)\s*("(?:[^"\\]|\\.)*"|`[^`]*`)', m.group(1)):
            out.append((op, re.sub(r"\\(.)", r"\1", lit[1:-1]) if lit[0] == '"' else lit[1:-1]))
    return out


def top_level_alternatives(regex):
    """regex split at the | that are outside brackets, parentheses and escapes."""
    alts, cur, depth, i, in_class = [], "", 0, 0, False
    while i < len(regex):
        c = regex[i]
        if c == "\\":
            cur += regex[i:i + 2]
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif c == "|" and depth == 0:
            alts.append(cur)
            cur, i = "", i + 1
            continue
        cur += c
        i += 1
    return alts + [cur]


class Files(unittest.TestCase):
    def test_every_yaml_and_json_parses(self):
        files = [f for pat in ("etc/**/*.yaml", "etc/**/*.yml", "docker/*.yaml", "docker/*.yml", ".clang-*")
                 for f in glob.glob(src(pat), recursive=True)]
        self.assertGreaterEqual(len(files), 8)
        for f in files:
            with open(f) as fh:
                self.assertIsNotNone(yaml.safe_load(fh), f)
        for f in glob.glob(src("etc/**/*.json"), recursive=True):
            json.load(open(f))

    def test_the_shipped_configs_pass_the_shippers_own_check(self):
        for cfg in ("etc/jobtrail.yaml", "docker/jobtrail.yaml"):
            r = subprocess.run([SHIPPER, "--config", src(cfg), "--check-config"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, cfg + ": " + r.stderr)

    def test_loki_values_have_what_a_gpu_cluster_needs(self):
        v = yaml.safe_load(open(src("etc/loki/values.yaml")))
        self.assertEqual(v["deploymentMode"], "SimpleScalable")
        sc = v["loki"]["schemaConfig"]["configs"][-1]
        self.assertEqual((sc["store"], sc["schema"]), ("tsdb", "v13"))
        self.assertTrue(v["loki"]["compactor"]["retention_enabled"])
        lim = v["loki"]["limits_config"]
        self.assertEqual(lim["max_query_length"], "721h")
        self.assertTrue(lim["allow_structured_metadata"])
        self.assertEqual(lim["max_line_size"], "256KB")  # what shipper.max_line_bytes cuts to
        period = {r["selector"]: r["period"] for r in lim["retention_stream"]}
        self.assertEqual(period['{job="kmsg"}'], "2160h")  # 90 days
        self.assertEqual(period['{job="fabric-manager"}'], "2160h")
        self.assertEqual(period['{job="slurm-prolog-epilog"}'], "336h")  # 14 days
        self.assertEqual(period['{job="nccl"}'], "336h")
        # Loki believes whatever is pushed: nothing reaches it without credentials.
        self.assertTrue(v["loki"]["auth_enabled"])
        self.assertTrue(v["gateway"]["enabled"])
        self.assertTrue(v["gateway"]["basicAuth"]["enabled"])
        self.assertTrue(v["gateway"]["basicAuth"]["existingSecret"])
        compose = yaml.safe_load(open(src("docker/compose.yaml")))["services"]
        self.assertNotIn("ports", compose["loki"])  # only the gateway is reachable
        gw = open(src("docker/gateway.conf")).read()
        self.assertIn("auth_basic_user_file", gw)
        self.assertIn("proxy_pass http://loki:3100", gw)
        node_cfg = yaml.safe_load(open(src("docker/jobtrail.yaml")))["shipper"]["loki"]
        self.assertTrue(node_cfg["url"].startswith("http://gateway:"))
        self.assertTrue(node_cfg["username"] and node_cfg["password_file"])
        user = open(src("docker/htpasswd")).read().split(":")[0]
        self.assertEqual(user, node_cfg["username"])
        # The docker demo's Loki has the same limits.
        d = yaml.safe_load(open(src("docker/loki-config.yaml")))
        self.assertEqual(d["limits_config"], lim)
        self.assertEqual(d["schema_config"]["configs"][-1]["schema"], "v13")

    def test_alert_rules_have_summary_and_a_jobtrail_runbook(self):
        names = set()
        for alert, _ in rule_queries():
            names.add(alert)
        self.assertEqual(names, {"GPUFatalXid", "GPUFatalEventFromDCGM", "FabricManagerError", "NCCLAbortStorm",
                                 "SlurmPrologEpilogScriptFailed", "JobtrailShipperSilent"})
        doc = yaml.safe_load(open(src("etc/loki/rules/jobtrail-alerts.yaml")))
        for g in doc["groups"]:
            for r in g["rules"]:
                self.assertIn("summary", r["annotations"], r["alert"])
                self.assertRegex(r["annotations"]["runbook"], r"jobtrail (bundle|xid)|jobtrail-shipper", r["alert"])

    def test_the_dcgm_alert_fires_on_double_bit_ecc_and_on_fatal_xids_dcgm_saw(self):
        # The event and severity values the shipper's dcgm source writes (dcgm/event.hpp).
        expr = dict(rule_queries())["GPUFatalEventFromDCGM"]
        self.assertRegex(expr, r'count_over_time\(\{job="dcgm"\} \| event="ecc_dbe" or \(event="xid" and '
                               r'severity="fatal"\) \[5m\]\)\) > 0')

    def test_the_fatal_xid_rule_lists_exactly_the_catalogues_fatal_codes(self):
        r = subprocess.run([JOBTRAIL, "--json", "xid", "--catalogue"], capture_output=True, text=True, check=True)
        fatal = {x["xid"] for x in json.loads(r.stdout) if x["severity"] == "fatal"}
        self.assertTrue({79, 48, 74, 95} <= fatal)
        expr = dict(rule_queries())["GPUFatalXid"]
        codes = {int(c) for c in re.search(r"\): \(([0-9|]+)\),", expr).group(1).split("|")}
        self.assertEqual(codes, fatal)

    def test_every_kmsg_line_filter_is_anchored_at_the_start_of_the_message(self):
        # The shipper sends the kernel message as the whole line, and the kernel prints
        # user-chosen names (a crashing binary's) inside its lines: an unanchored "NVRM: Xid" is
        # a forgeable alert.
        named = rule_queries() + dashboard_queries() + readme_queries()
        r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--json", "logql", "4242", "--nodes", "gpu01,gpu02"],
                           capture_output=True, text=True, check=True)
        named += [("jobtrail logql: " + q["name"], q["logql"]) for q in json.loads(r.stdout)]
        checked = 0
        for name, q in named:
            for op, text in kmsg_line_filters(q):
                self.assertEqual(op, "|~", "%s: a substring filter on kernel lines: %s" % (name, q))
                for alt in top_level_alternatives(text):
                    self.assertTrue(alt.startswith("^"), "%s: %r not anchored in %s" % (name, alt, q))
                checked += 1
        self.assertGreaterEqual(checked, 5)
        # The helpers see what they must: an unanchored alternative and a substring filter.
        self.assertEqual(kmsg_line_filters('sum(count_over_time({job="kmsg", node="a"} |= "x" |~ `^a|b` [5m]))'),
                         [("|=", "x"), ("|~", "^a|b")])
        self.assertEqual(top_level_alternatives(r"^a(b|c)[|]\||d"), [r"^a(b|c)[|]\|", "d"])

    def test_the_dashboard_has_a_job_view_and_a_fleet_view(self):
        d = dashboard()
        self.assertIn("job_id", [v["name"] for v in d["templating"]["list"]])
        titles = [p["title"] for p in d["panels"]]
        for want in ("Prolog and epilog", "NCCL warnings", "Xid events by node (job's nodes)",
                     "Xid rate by node and code", "mlx5 events by node",
                     "DCGM events of the job: on its GPUs, and node-wide ones on its nodes",
                     "Fatal and error DCGM events across the fleet"):
            self.assertIn(want, titles)
        self.assertTrue(any(p.get("datasource", {}).get("type") == "prometheus" for p in d["panels"]))

    def test_the_dashboard_shows_one_cluster_at_a_time(self):
        # Job ids repeat from cluster to cluster in one Loki: a job's panels must not mix two.
        d = dashboard()
        var = {v["name"]: v for v in d["templating"]["list"]}
        self.assertFalse(var["cluster"]["multi"] or var["cluster"]["includeAll"])
        self.assertIn('cluster="$cluster"', var["job_nodes"]["query"])
        for p in d["panels"]:
            for t in p.get("targets", []) if p.get("datasource", {}).get("type") == "loki" else ():
                self.assertIn('cluster="$cluster"', t["expr"], p["title"])

    def test_logrotate_works_only_in_root_owned_directories(self):
        # logrotate runs as root: in a directory a job's user owns (the NCCL job directories) a
        # planted link makes root compress or chown the user's pick. Each rotated glob's
        # directory must be one tmpfiles.d makes root:root and writable by nobody else, and the
        # NCCL files are aged out by tmpfiles.d instead.
        dirs = {}
        with open(src("etc/tmpfiles.d/jobtrail.conf")) as fh:
            for line in fh:
                f = line.split()
                if f and f[0] == "d":
                    dirs[f[1]] = {"mode": int(f[2], 8), "owner": (f[3], f[4]), "age": f[5] if len(f) > 5 else "-"}
        with open(src("etc/logrotate.d/jobtrail")) as fh:
            text = re.sub(r"#.*", "", fh.read())
        stanzas = re.findall(r"([^{}]+)\{([^{}]*)\}", text)
        self.assertGreaterEqual(len(stanzas), 1)
        for paths, body in stanzas:
            self.assertNotRegex(body, r"\bsu\b", "a stanza needing su is in a user's directory")
            for p in paths.split():
                d = os.path.dirname(p)
                self.assertIn(d, dirs, "%s: its directory is not one tmpfiles.d creates" % p)
                self.assertEqual(dirs[d]["owner"], ("root", "root"), p)
                self.assertEqual(dirs[d]["mode"] & 0o022, 0, p)
                self.assertFalse(p.startswith("/var/log/slurm/nccl/"), p)
        self.assertNotEqual(dirs["/var/log/slurm/nccl"]["age"], "-", "nothing would remove old NCCL files")

    def test_maintainer_scripts_never_restart_slurmd(self):
        for f in glob.glob(src("packaging/debian/*/*")):
            text = open(f).read()
            for line in text.splitlines():
                if line.lstrip().startswith("#") or "echo" in line:
                    continue
                self.assertNotRegex(line, r"(systemctl|service|invoke-rc\.d|deb-systemd-invoke|pkill|killall|scontrol).*slurm",
                                    "%s: %s" % (f, line))


class LogQL(unittest.TestCase):
    @skips.requires(os.path.isdir(os.path.join(JS, "node_modules/@grafana/lezer-logql")),
                    "Grafana's LogQL grammar missing (npm ci in tests/js)")
    def test_every_query_parses_and_uses_only_what_the_shipper_produces(self):
        named = rule_queries() + dashboard_queries() + readme_queries()
        r = subprocess.run([JOBTRAIL, "--config", "/dev/null", "--json", "logql", "4242", "--nodes", "gpu01,gpu02"],
                           capture_output=True, text=True, check=True)
        named += [("jobtrail logql: " + q["name"], q["logql"]) for q in json.loads(r.stdout)]
        self.assertGreater(len(named), 25)
        results = parse_logql([{"name": n, "logql": q} for n, q in named])
        bad = [(q["name"], q["logql"], q["error"]) for q in results if not q["ok"]]
        self.assertEqual(bad, [])
        for q in results:
            unknown = set(q["labels"]) - LABELS - METADATA
            self.assertEqual(unknown, set(), "%s: %s" % (q["name"], q["logql"]))
            for job in re.findall(r'\bjob\s*=\s*"([^"]+)"', q["logql"]):
                self.assertIn(job, JOBS, "%s: %s" % (q["name"], q["logql"]))

    @skips.requires(os.path.isdir(os.path.join(JS, "node_modules/@grafana/lezer-logql")),
                    "Grafana's LogQL grammar missing (npm ci in tests/js)")
    def test_the_checker_itself_rejects_broken_logql(self):
        res = parse_logql(['{job="kmsg" |= "x"', 'sum by (node) (count_over_time({job="kmsg"}))'])
        self.assertEqual([q["ok"] for q in res], [False, False])


class Docker(unittest.TestCase):
    def test_compose_and_dockerfile_refer_to_files_that_exist(self):
        c = yaml.safe_load(open(src("docker/compose.yaml")))
        self.assertTrue({"slurmctld", "node1", "node2", "loki", "grafana"} <= set(c["services"]))
        for name, s in c["services"].items():
            for v in s.get("volumes", []):
                host = v.split(":")[0]
                if host.startswith("."):
                    self.assertTrue(os.path.exists(os.path.normpath(src("docker", host))), "%s: %s" % (name, v))
            b = s.get("build")
            if b:
                self.assertTrue(os.path.exists(os.path.normpath(src("docker", b["context"], b["dockerfile"]))))
        self.assertTrue(c["services"]["loki"]["image"].startswith("grafana/loki:3."))
        for line in open(src("docker/Dockerfile")):
            m = re.match(r"COPY (?!--from)(.+) (\S+)$", line.strip())
            if m and m.group(1) != ".":
                for path in m.group(1).split():
                    self.assertTrue(os.path.exists(src(path)), line)

    def test_containers_run_the_tests_stand_ins_not_copies(self):
        text = open(src("docker/Dockerfile")).read()
        self.assertIn("COPY tests/integration/bin/nvidia-smi tests/integration/bin/dcgmi tests/integration/bin/fake-nccl", text)
        self.assertIn("bash scripts/install-deps.sh", text)  # the same packages as the tests
        self.assertIn("include /usr/share/doc/jobtrail-node/slurm.conf.jobtrail", open(src("docker/slurm.conf")).read())

    @unittest.skipUnless(DEBS, "JOBTRAIL_DEBS not set: packages not built in this run")
    def test_every_path_the_containers_use_is_in_the_packages(self):
        contents = ""
        for deb in glob.glob(os.path.join(DEBS, "*.deb")):
            contents += subprocess.run(["dpkg-deb", "-c", deb], capture_output=True, text=True, check=True).stdout
        used = set()
        for f in ("docker/entrypoint.sh", "docker/slurm.conf", "docker/Dockerfile", "docker/compose.yaml"):
            used |= set(re.findall(r"(/usr/(?:s?bin|share/doc/jobtrail-node|share/jobtrail)/[\w./-]+)", open(src(f)).read()))
        used |= {"/usr/share/jobtrail/grafana/dashboards/jobtrail.json", "/etc/slurm/plugstack.conf.d/jobtrail.conf"}
        used = {u for u in used if "jobtrail" in u}
        self.assertGreaterEqual(len(used), 5)
        for u in sorted(used):
            self.assertIn("." + u, contents, u)


if __name__ == "__main__":
    skips.main()
