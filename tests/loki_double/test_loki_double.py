#!/usr/bin/python3
"""The Loki test double answers like the real Loki in ../shared/reference/loki-observed-responses.md."""
import gzip, json, os, subprocess, sys, tempfile, time, unittest, urllib.error, urllib.parse, urllib.request

import snappy

HERE = os.path.dirname(os.path.abspath(__file__))
NS = 1_000_000_000


# A protobuf encoder written for the test only (the double decodes by hand; jobtrail encodes with
# libprotobuf): PushRequest{streams=1{labels=1, entries=2{timestamp=1{seconds=1,nanos=2}, line=2,
# structuredMetadata=3{name=1,value=2}}}}.
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def field(num, payload):
    if isinstance(payload, int):
        return varint(num << 3) + varint(payload)
    return varint(num << 3 | 2) + varint(len(payload)) + payload


def encode(streams):
    msg = b""
    for labels, entries in streams:
        s = field(1, labels.encode())
        for ts, line, sm in entries:
            e = field(1, field(1, ts // NS) + field(2, ts % NS)) + field(2, line.encode())
            for k, v in sm.items():
                e += field(3, field(1, k.encode()) + field(2, v.encode()))
            s += field(2, e)
        msg += field(1, s)
    return snappy.compress(msg)


class Double:
    def __init__(self, *args):
        self.tmp = tempfile.mkdtemp()
        pf = os.path.join(self.tmp, "port")
        self.p = subprocess.Popen([sys.executable, os.path.join(HERE, "loki_double.py"), "--port-file", pf] + list(args),
                                  stdout=subprocess.DEVNULL)
        for _ in range(200):
            if os.path.exists(pf):
                break
            time.sleep(0.02)
        with open(pf) as f:
            self.url = "http://127.0.0.1:%s" % f.read()

    def close(self):
        self.p.terminate()
        self.p.wait()

    def req(self, method, path, body=None, headers=None):
        r = urllib.request.Request(self.url + path, data=body, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(r, timeout=10) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def push_json(self, streams, headers=None):
        doc = {"streams": [{"stream": s, "values": v} for s, v in streams]}
        h = {"Content-Type": "application/json"}
        h.update(headers or {})
        return self.req("POST", "/loki/api/v1/push", json.dumps(doc).encode(), h)

    def push_proto(self, streams, headers=None):
        h = {"Content-Type": "application/x-protobuf"}
        h.update(headers or {})
        return self.req("POST", "/loki/api/v1/push", encode(streams), h)

    def query(self, q, **kw):
        params = {"query": q, "start": "0", "end": str(time.time_ns() + 3600 * NS)}
        params.update({k: str(v) for k, v in kw.items()})
        return self.req("GET", "/loki/api/v1/query_range?" + urllib.parse.urlencode(params))


class DoubleTest(unittest.TestCase):
    def setUp(self):
        self.d = Double()
        self.now = time.time_ns()

    def tearDown(self):
        self.d.close()

    def test_json_push_and_query_both_directions(self):
        ts = [str(self.now - i * NS) for i in range(3)]
        st, body = self.d.push_json([({"job": "kmsg", "node": "n1"}, [[ts[2], "a"], [ts[1], "b"], [ts[0], "c"]])])
        self.assertEqual((st, body), (204, ""))
        st, body = self.d.query('{job="kmsg"}', direction="forward", limit=2)
        doc = json.loads(body)
        self.assertEqual(doc["status"], "success")
        self.assertEqual(doc["data"]["resultType"], "streams")
        self.assertEqual([v[1] for v in doc["data"]["result"][0]["values"]], ["a", "b"])
        doc = json.loads(self.d.query('{job="kmsg"} |= "c"')[1])
        self.assertEqual([v[1] for v in doc["data"]["result"][0]["values"]], ["c"])
        doc = json.loads(self.d.query('{job="kmsg"}')[1])  # backward by default
        self.assertEqual([v[1] for v in doc["data"]["result"][0]["values"]], ["c", "b", "a"])

    def test_query_limit_takes_the_first_entries_across_streams_each_under_its_own_labels(self):
        t = self.now - 100 * NS
        self.d.push_json([({"job": "j", "node": "a"}, [[str(t + 2 * i), "a%d" % i] for i in range(5)]),
                          ({"job": "j", "node": "b"}, [[str(t + 2 * i + 1), "b%d" % i] for i in range(5)])])
        doc = json.loads(self.d.query('{job="j"}', direction="forward", limit=4)[1])
        got = sorted((v[0], r["stream"]["node"], v[1]) for r in doc["data"]["result"] for v in r["values"])
        self.assertEqual([(n, l) for _, n, l in got], [("a", "a0"), ("b", "b0"), ("a", "a1"), ("b", "b1")])
        doc = json.loads(self.d.query('{job="j"}', direction="backward", limit=3)[1])
        got = sorted(((v[0], r["stream"]["node"], v[1]) for r in doc["data"]["result"] for v in r["values"]), reverse=True)
        self.assertEqual([(n, l) for _, n, l in got], [("b", "b4"), ("a", "a4"), ("b", "b3")])

    def test_snappy_protobuf_with_structured_metadata(self):
        st, _ = self.d.push_proto([('{job="kmsg", node="n1"}', [(self.now, "NVRM: Xid 79", {"xid": "79"})])])
        self.assertEqual(st, 204)
        store = json.loads(self.d.req("GET", "/-/store")[1])
        self.assertEqual(store[0]["labels"], {"job": "kmsg", "node": "n1"})
        self.assertEqual(store[0]["entries"], [[str(self.now), "NVRM: Xid 79", {"xid": "79"}]])
        doc = json.loads(self.d.query('{job="kmsg"} | xid="79"')[1])
        self.assertEqual(doc["data"]["result"][0]["stream"]["xid"], "79")  # merged without categorize-labels
        self.assertEqual(self.d.query('{job="kmsg"} | xid="48"')[1].count("NVRM"), 0)

    def test_exact_duplicates_are_stored_once_same_ts_other_line_twice(self):
        e = [str(self.now), "same"]
        self.assertEqual(self.d.push_json([({"job": "x"}, [e])])[0], 204)
        self.assertEqual(self.d.push_json([({"job": "x"}, [e])])[0], 204)
        self.assertEqual(self.d.push_json([({"job": "x"}, [[str(self.now), "other"]])])[0], 204)
        store = json.loads(self.d.req("GET", "/-/store")[1])
        self.assertEqual(len(store[0]["entries"]), 2)

    def test_entry_too_far_behind_is_rejected_with_loki_message(self):
        self.d.push_json([({"job": "w"}, [[str(self.now), "new"]])])
        st, body = self.d.push_json([({"job": "w"}, [[str(self.now - 2 * 3600 * NS), "old"]])])
        self.assertEqual(st, 400)
        self.assertIn("ignored, reason: 'entry too far behind", body)
        self.assertTrue(body.endswith("total ignored: 1 out of 1\n"))

    def test_partial_acceptance_on_400(self):
        st, body = self.d.push_json([({"job": "old"}, [[str(self.now - 200 * 3600 * NS), "too old"], [str(self.now), "fresh"]])])
        self.assertEqual(st, 400)
        self.assertIn("has timestamp too old", body)
        doc = json.loads(self.d.query('{job="old"}')[1])
        self.assertEqual([v[1] for v in doc["data"]["result"][0]["values"]], ["fresh"])

    def test_limits_and_label_validation(self):
        st, body = self.d.push_json([({"job": "long"}, [[str(self.now), "x" * 300 * 1024]])])
        self.assertEqual(st, 400)
        self.assertIn("Max entry size '262144' bytes exceeded for stream '{job=\"long\"}'", body)
        st, body = self.d.push_proto([('{bad-name="v"}', [(self.now, "x", {})])])
        self.assertEqual((st, body), (400, "1:5: parse error: unexpected character inside braces: '-'\n"))
        st, body = self.d.push_proto([("{}", [(self.now, "x", {})])])
        self.assertEqual((st, body), (400, "error at least one label pair is required per stream\n"))
        labels = {"l%d" % i: "v" for i in range(16)}
        st, body = self.d.push_json([(labels, [[str(self.now), "x"]])])
        self.assertIn("has 16 label names; limit 15", body)
        st, body = self.d.push_json([({"job": "future"}, [[str(self.now + 3600 * NS), "x"]])])
        self.assertIn("has timestamp too new", body)

    def test_wire_errors(self):
        doc = json.dumps({"streams": [{"stream": {"job": "x"}, "values": [[str(self.now), "x"]]}]}).encode()
        st, body = self.d.req("POST", "/loki/api/v1/push", doc, {})
        self.assertEqual((st, body), (400, "snappy: corrupt input\n"))
        st, body = self.d.req("POST", "/loki/api/v1/push", doc, {"Content-Type": "application/json", "Content-Encoding": "br"})
        self.assertEqual((st, body), (400, 'Content-Encoding "br" not supported\n'))
        st, _ = self.d.req("POST", "/loki/api/v1/push", gzip.compress(doc),
                           {"Content-Type": "application/json", "Content-Encoding": "gzip"})
        self.assertEqual(st, 204)
        st, body = self.d.push_json([({"job": "ts"}, [[123, "number ts"]])])
        self.assertEqual(st, 400)

    def test_query_limits_series_labels(self):
        self.d.push_json([({"job": "a", "node": "n1"}, [[str(self.now), "x"]]), ({"job": "b", "node": "n2"}, [[str(self.now), "y"]])])
        st, body = self.d.query('{job="a"}', limit=5001)
        self.assertEqual((st, body), (400, "max entries limit per query exceeded, limit > max_entries_limit_per_query (5001 > 5000)\n"))
        st, body = self.d.req("GET", "/loki/api/v1/series?" + urllib.parse.urlencode({"match[]": '{job=~"a|b"}'}))
        self.assertEqual(len(json.loads(body)["data"]), 2)
        self.assertEqual(json.loads(self.d.req("GET", "/loki/api/v1/labels")[1])["data"], ["job", "node"])
        self.assertEqual(json.loads(self.d.req("GET", "/loki/api/v1/label/node/values")[1])["data"], ["n1", "n2"])

    def test_faults(self):
        self.d.req("POST", "/-/fault", json.dumps({"mode": "status", "status": 503, "count": 1}).encode())
        self.assertEqual(self.d.push_json([({"job": "f"}, [[str(self.now), "x"]])])[0], 503)
        self.assertEqual(self.d.push_json([({"job": "f"}, [[str(self.now), "x"]])])[0], 204)


class AuthAndRateTest(unittest.TestCase):
    def test_tenant_header_required_when_auth_is_on(self):
        d = Double("--auth")
        try:
            now = time.time_ns()
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])]), (401, "no org id\n"))
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])], {"X-Scope-OrgID": "a/b"}), (400, "invalid tenant ID\n"))
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])], {"X-Scope-OrgID": "t1"})[0], 204)
        finally:
            d.close()

    def test_ingestion_rate_limit_is_429_for_the_whole_request(self):
        d = Double("--ingestion-rate-mb", "1", "--burst-mb", "1")
        try:
            now = time.time_ns()
            big = [[str(now + i), "x" * 100_000] for i in range(15)]
            st, body = d.push_json([({"job": "r"}, big)])
            self.assertEqual(st, 429)
            self.assertTrue(body.startswith("Ingestion rate limit exceeded for user fake (limit: 1048576 bytes/sec)"))
            self.assertEqual(json.loads(d.req("GET", "/-/store")[1]), [])
        finally:
            d.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
