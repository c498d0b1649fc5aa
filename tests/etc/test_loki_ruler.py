#!/usr/bin/python3
"""Where Loki's ruler finds jobtrail's alert rules in each Loki we ship (the Helm values for the
grafana/loki chart, the docker demo's Loki), and whether that is where the shippers' streams are:
Loki's local rule store reads <directory>/<tenant>/<file> and evaluates a tenant's rules on that
tenant's streams only (the tenant is `fake` when auth_enabled is false).
No Helm here (not in Debian): the chart's keys and how it renders the ruler are pinned below from
its source. `test_loki_ruler.py render` prints the rulers and their tenant directories.
Needs JOBTRAIL_BUILD (the shipper)."""
import copy, glob, os, re, shutil, subprocess, sys, tempfile, unittest

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../support"))
import skips  # noqa: E402
from jtsupport import SHIPPER, SRC, LokiDouble  # noqa: E402

RULES_DIR = os.path.join(SRC, "etc/loki/rules")

# The chart the values target, and the value keys its templates read, checked in its source
# (github grafana/loki, production/helm/loki at chart version 6.55.0, commit e22a9bed5):
# values.yaml (the `loki.config` template), templates/_helpers.tpl (loki.rulerConfig,
# loki.rulerStorageConfig, loki.lokiStorageConfig.s3, loki.deployment.isScalable),
# templates/validate.yaml, templates/{backend,read,write}/*.yaml, templates/gateway/,
# templates/memcached/_memcached-statefulset.tpl. The chart reads `loki.rulerConfig`, never
# `loki.ruler`.
CHART_VERSION = "6.55.0"
CHART_KEYS = {
    "deploymentMode",
    "loki.auth_enabled",
    "loki.storage.type", "loki.storage.bucketNames.chunks", "loki.storage.bucketNames.ruler",
    "loki.storage.bucketNames.admin", "loki.storage.s3.endpoint", "loki.storage.s3.region",
    "loki.storage.s3.s3ForcePathStyle", "loki.storage.s3.insecure",
    "write.replicas", "write.persistence.size", "read.replicas", "backend.replicas",
    "backend.persistence.size", "singleBinary.replicas",
    "gateway.enabled", "gateway.basicAuth.enabled", "gateway.basicAuth.existingSecret",
    "chunksCache.allocatedMemory", "resultsCache.allocatedMemory", "minio.enabled",
    "ruler.enabled", "sidecar.rules.enabled",
}
# Keys whose whole value the chart hands on (toYaml into Loki's config or the pod spec): what is
# under them is Loki's or Kubernetes' to check, not the chart's.
CHART_PASSTHROUGH = {
    "loki.schemaConfig", "loki.compactor", "loki.limits_config", "loki.ingester", "loki.rulerConfig",
    "write.resources", "read.resources", "backend.extraVolumes", "backend.extraVolumeMounts",
}
# The chart's defaults that its ruler template uses (values.yaml).
CHART_DEFAULTS = {"loki": {"rulerConfig": {"wal": {"dir": "/var/loki/ruler-wal"}}},
                  "ruler": {"enabled": True}, "sidecar": {"rules": {"enabled": True, "folder": "/rules"}}}
# Loki's ruler keys (pkg/ruler/base/ruler.go, pkg/ruler/config.go, pkg/ruler/rulestore/local).
LOKI_RULER_KEYS = {"alertmanager_url", "enable_api", "enable_alertmanager_v2", "rule_path", "evaluation_interval",
                   "external_url", "storage", "ring", "wal", "remote_write"}

# Prometheus' rule file format, which Loki's ruler reads (rulefmt).
GROUP_KEYS = {"name", "interval", "limit", "rules", "query_offset", "labels"}
ALERT_KEYS = {"alert", "expr", "for", "keep_firing_for", "labels", "annotations"}
DURATION = re.compile(r"(?!$)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")


def load(*p):
    with open(os.path.join(SRC, *p)) as f:
        return yaml.safe_load(f)


def leaves(d, prefix=""):
    for k, v in d.items():
        path = prefix + k
        if path in CHART_PASSTHROUGH or not isinstance(v, dict) or not v:
            yield path
        else:
            yield from leaves(v, path + ".")


def coalesce(defaults, values):
    """Helm's merge of the user's values over the chart's: maps merged key by key."""
    out = copy.deepcopy(defaults)
    for k, v in values.items():
        out[k] = coalesce(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else copy.deepcopy(v)
    return out


def rules_files():
    return sorted(os.path.basename(f) for f in glob.glob(os.path.join(RULES_DIR, "*.yaml")))


def local_directory(ruler):
    """The directory of a ruler's local rule store; None for any other store."""
    st = (ruler or {}).get("storage", {})
    return st.get("local", {}).get("directory") if st.get("type") == "local" else None


def configmap_from_readme():
    """The ConfigMap README's set-up creates from the packaged rules: (name, files)."""
    with open(os.path.join(SRC, "README.md")) as f:
        m = re.search(r"kubectl -n \S+ create configmap (\S+) --from-file=/usr/share/jobtrail/loki/rules/", f.read())
    return (m.group(1), rules_files()) if m else (None, [])


class Helm:
    """What the chart renders from etc/loki/values.yaml for the ruler (templates/_helpers.tpl
    loki.rulerConfig: `mergeOverwrite (dict "storage" <loki.rulerStorageConfig>) loki.rulerConfig`;
    the storage is {type: local} when rulerConfig.storage.type is local, else the object store's
    ruler bucket) and the backend pod's mounts (templates/backend/statefulset-backend.yaml)."""

    def __init__(self):
        self.values = load("etc/loki/values.yaml")
        v = coalesce(CHART_DEFAULTS, self.values)
        self.auth = v["loki"]["auth_enabled"]
        rc = v["loki"]["rulerConfig"]
        if rc.get("storage", {}).get("type") == "local":
            storage = {"type": "local"}
        else:
            st = v["loki"]["storage"]
            storage = {"type": st["type"], st["type"]: {"bucketnames": st.get("bucketNames", {}).get("ruler")}}
        self.ruler = coalesce({"storage": storage}, rc) if v["ruler"]["enabled"] else None
        b = v.get("backend", {})
        self.mounts = [("config", "/etc/loki/config"), ("runtime-config", "/etc/loki/runtime-config"), ("tmp", "/tmp"),
                       ("data", "/var/loki")]
        if v["sidecar"]["rules"]["enabled"]:
            self.mounts.append(("sc-rules-volume", v["sidecar"]["rules"]["folder"]))
        self.mounts += [(m["name"], m["mountPath"]) for m in b.get("extraVolumeMounts", [])]
        self.volumes = {x["name"]: x for x in b.get("extraVolumes", [])}
        self.read_only = {m["mountPath"]: m.get("readOnly", False) for m in b.get("extraVolumeMounts", [])}

    def tenant_dirs(self):
        """{tenant: files} as the ruler's local store sees them."""
        directory = local_directory(self.ruler)
        cm_name, cm_files = configmap_from_readme()
        out = {}
        for name, path in self.mounts:
            if os.path.dirname(path.rstrip("/")) == directory:
                cm = self.volumes.get(name, {}).get("configMap", {}).get("name")
                out[os.path.basename(path.rstrip("/"))] = cm_files if cm and cm == cm_name else []
        return out


class Docker:
    """The docker demo's Loki: its config file and the compose volumes of its container."""

    def __init__(self):
        cfg = load("docker/loki-config.yaml")
        self.auth = cfg.get("auth_enabled", True)  # Loki's default is true
        self.ruler = cfg.get("ruler")
        self.volumes = load("docker/compose.yaml")["services"]["loki"].get("volumes", [])

    def tenant_dirs(self):
        directory = local_directory(self.ruler)
        out = {}
        for v in self.volumes:
            host, path = v.split(":")[:2]
            if os.path.dirname(path.rstrip("/")) == directory:
                host = os.path.normpath(os.path.join(SRC, "docker", host))
                out[os.path.basename(path.rstrip("/"))] = sorted(
                    f for f in os.listdir(host) if f.endswith(".yaml")) if os.path.isdir(host) else []
        return out


def pushed_tenants(shipper_cfg, auth):
    """The tenants a shipper with this config's `cluster` and `shipper.loki.tenant` stores its
    streams under, in the double with Loki's auth_enabled (a tenant from X-Scope-OrgID, refusing
    a push without one) or without (everything is `fake`, as in Loki)."""
    work = tempfile.mkdtemp(prefix="jobtrail-ruler-")
    loki = LokiDouble(*(["--auth"] if auth else []))
    try:
        os.makedirs(work + "/logs")
        with open(work + "/logs/probe.log", "w") as f:
            f.write("probe line\n")
        lk = {"url": loki.url}
        if "tenant" in shipper_cfg.get("shipper", {}).get("loki", {}):
            lk["tenant"] = shipper_cfg["shipper"]["loki"]["tenant"]
        cfg = {"node": "n1", "collector": {"state_dir": work + "/state", "run_dir": work + "/run"},
               "shipper": {"loki": lk, "metrics": "",
                           "sources": {"kmsg": False, "journald": {"enabled": False},
                                       "files": [{"name": "probe", "paths": [work + "/logs/*.log"], "job": "probe"}]}}}
        if "cluster" in shipper_cfg:
            cfg["cluster"] = shipper_cfg["cluster"]
        with open(work + "/cfg.yaml", "w") as f:
            yaml.safe_dump(cfg, f)
        r = subprocess.run([SHIPPER, "--config", work + "/cfg.yaml", "--once", "--once-timeout", "3"],
                           capture_output=True, text=True, timeout=60)
        store = loki.store()
        return r, {s["tenant"] for s in store if s["labels"].get("job") == "probe"}
    finally:
        loki.close()
        shutil.rmtree(work, ignore_errors=True)


def documented_tenant():
    """etc/jobtrail.yaml with its commented `tenant:` example taken in, as an operator does."""
    with open(os.path.join(SRC, "etc/jobtrail.yaml")) as f:
        text = f.read()
    m = re.search(r"^(\s*)# (tenant: \S+)", text, re.M)
    return yaml.safe_load(text.replace(m.group(0), m.group(1) + m.group(2), 1)) if m else None


class Chart(unittest.TestCase):
    def test_every_value_is_a_key_the_chart_reads(self):
        unread = [k for k in leaves(Helm().values)
                  if k not in CHART_KEYS and not any(k.startswith(p + ".") or k == p for p in CHART_PASSTHROUGH)]
        self.assertEqual(unread, [], "keys the grafana/loki chart %s never reads" % CHART_VERSION)
        with open(os.path.join(SRC, "etc/loki/values.yaml")) as f:
            self.assertIn("--version " + CHART_VERSION, f.read())
        # The checker sees a key the chart ignores.
        self.assertEqual([k for k in leaves({"loki": {"ruler": {"enable_api": True}}}) if k not in CHART_KEYS],
                         ["loki.ruler.enable_api"])

    def test_each_ruler_reads_local_rules_and_sends_alerts_to_an_alertmanager(self):
        for name, d in (("helm", Helm()), ("docker", Docker())):
            self.assertIsNotNone(d.ruler, name + ": no ruler")
            self.assertLessEqual(set(d.ruler), LOKI_RULER_KEYS, name)
            self.assertEqual(d.ruler["storage"]["type"], "local", name)
            self.assertTrue(d.ruler["storage"]["local"]["directory"].startswith("/"), name)
            self.assertRegex(d.ruler.get("alertmanager_url", ""), r"^https?://[\w.-]+:\d+$", name)
        am = Docker().ruler["alertmanager_url"]
        services = load("docker/compose.yaml")["services"]
        host = re.match(r"https?://([\w.-]+):", am).group(1)
        self.assertIn(host, set(services), "docker: the ruler sends alerts to %s, not a service of the compose file" % am)

    def test_each_tenant_directory_holds_every_rules_file(self):
        self.assertGreaterEqual(len(rules_files()), 1)
        for name, d in (("helm", Helm()), ("docker", Docker())):
            dirs = d.tenant_dirs()
            self.assertGreaterEqual(len(dirs), 1, "%s: no rules under the ruler's directory" % name)
            for tenant, files in dirs.items():
                self.assertEqual(files, rules_files(), "%s: tenant %s" % (name, tenant))
            self.assertEqual("fake" in dirs, not d.auth,
                             "%s: rules for tenant fake are read only with auth_enabled false" % name)
        h = Helm()
        self.assertTrue(all(h.read_only[p] for _, p in h.mounts if p in h.read_only))
        cm = h.volumes["jobtrail-rules"]["configMap"]["name"]
        with open(os.path.join(SRC, "etc/loki/values.yaml")) as f:
            self.assertIn("create configmap %s --from-file=rules/" % cm, f.read())

    def test_the_rules_files_are_loki_rule_groups(self):
        alerts = 0
        for f in rules_files():
            doc = load("etc/loki/rules", f)
            self.assertEqual(set(doc), {"groups"}, f)
            names = [g["name"] for g in doc["groups"]]
            self.assertEqual(len(names), len(set(names)), "%s: group names repeat" % f)
            for g in doc["groups"]:
                self.assertLessEqual(set(g), GROUP_KEYS, g["name"])
                if "interval" in g:
                    self.assertRegex(g["interval"], DURATION)
                for r in g["rules"]:
                    self.assertLessEqual(set(r), ALERT_KEYS, r)
                    self.assertRegex(r["alert"], LABEL_NAME)
                    self.assertIsInstance(r["expr"], str)
                    self.assertRegex(r.get("for", "0s"), DURATION, r["alert"])
                    for k, v in list(r.get("labels", {}).items()) + list(r.get("annotations", {}).items()):
                        self.assertRegex(k, LABEL_NAME, r["alert"])
                        self.assertIsInstance(v, str, r["alert"])
                    alerts += 1
        self.assertGreaterEqual(alerts, 5)
        # (Each expr parses as LogQL in test_deliverables.py's LogQL test.)
        self.assertFalse(DURATION.match("") or DURATION.match("5 m") or DURATION.match("m5"))


class Tenants(unittest.TestCase):
    def test_a_cluster_shipping_as_documented_pushes_as_a_tenant_the_helm_ruler_has_rules_for(self):
        cfg = documented_tenant()
        self.assertIsNotNone(cfg, "etc/jobtrail.yaml documents no tenant example")
        h = Helm()
        r, tenants = pushed_tenants(cfg, h.auth)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(tenants), 1)
        self.assertLessEqual(tenants, set(h.tenant_dirs()), "rules are under %s" % sorted(h.tenant_dirs()))
        # Without the tenant the same shipper reaches no tenant at all.
        del cfg["shipper"]["loki"]["tenant"]
        r, tenants = pushed_tenants(cfg, h.auth)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(tenants, set())

    def test_the_docker_nodes_push_as_the_tenant_the_docker_ruler_has_rules_for(self):
        d = Docker()
        r, tenants = pushed_tenants(load("docker/jobtrail.yaml"), d.auth)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(tenants), 1)
        self.assertLessEqual(tenants, set(d.tenant_dirs()), "rules are under %s" % sorted(d.tenant_dirs()))


def render():
    for name, d in (("etc/loki/values.yaml (grafana/loki %s)" % CHART_VERSION, Helm()), ("docker/", Docker())):
        print("# %s: auth_enabled %s" % (name, str(d.auth).lower()))
        print(yaml.safe_dump({"ruler": d.ruler}, sort_keys=True), end="")
        directory = local_directory(d.ruler)
        for tenant, files in sorted(d.tenant_dirs().items()):
            print("#   %s/%s/: %s" % (directory, tenant, " ".join(files)))


if __name__ == "__main__":
    if sys.argv[1:] == ["render"]:
        render()
    else:
        skips.main()
