#!/usr/bin/python3
"""The Loki test double answers like the real Loki 3.4 in ../shared/reference/loki3-observed-responses.md
(section numbers below are that file's)."""
import gzip, json, os, sys, time, unittest, urllib.parse

import snappy

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "../support"))
from jtsupport import LokiDouble, http  # noqa: E402
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


class Double(LokiDouble):
    def __init__(self, *args):
        super().__init__(*args, python=sys.executable)

    def req(self, method, path, body=None, headers=None):
        return http(method, self.url + path, body, headers, timeout=10)

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
        self.assertEqual(store[0]["labels"], {"job": "kmsg", "node": "n1", "service_name": "kmsg"})
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
        self.assertIn("ignored, reason: 'entry too far behind, entry timestamp is: ", body)
        self.assertTrue(body.endswith("',\nuser 'fake', total ignored: 1 out of 1 for stream: "
                                      '{job="w", service_name="w"}\n'), body)

    def test_partial_acceptance_on_400(self):
        st, body = self.d.push_json([({"job": "old"}, [[str(self.now - 200 * 3600 * NS), "too old"], [str(self.now), "fresh"]])])
        self.assertEqual(st, 400)
        self.assertIn("has timestamp too old", body)
        doc = json.loads(self.d.query('{job="old"}')[1])
        self.assertEqual([v[1] for v in doc["data"]["result"][0]["values"]], ["fresh"])

    def test_limits_and_label_validation(self):
        st, body = self.d.push_json([({"job": "long"}, [[str(self.now), "x" * 300 * 1024]])])
        self.assertEqual(st, 400)
        self.assertIn("Max entry size '262144' bytes exceeded for stream '{job=\"long\", service_name=\"long\"}'", body)
        st, body = self.d.push_proto([('{bad-name="v"}', [(self.now, "x", {})])])
        self.assertEqual((st, body), (400, "couldn't parse labels: 1:5: parse error: unexpected character inside "
                                           "braces: '-'\n"))
        st, body = self.d.push_proto([("{}", [(self.now, "x", {})])])  # §8: Loki 3 stores it
        self.assertEqual((st, body), (204, ""))
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
        self.assertEqual(json.loads(self.d.req("GET", "/loki/api/v1/labels")[1])["data"], ["job", "node", "service_name"])
        self.assertEqual(json.loads(self.d.req("GET", "/loki/api/v1/label/node/values")[1])["data"], ["n1", "n2"])

    def test_series_answers_the_streams_with_entries_in_the_range(self):
        self.d.push_json([({"job": "s", "node": "old"}, [[str(self.now - 7200 * NS), "x"]]),
                          ({"job": "s", "node": "new"}, [[str(self.now), "y"]])])

        def nodes(start, end):
            st, body = self.d.req("GET", "/loki/api/v1/series?" + urllib.parse.urlencode(
                {"match[]": '{job="s"}', "start": str(start), "end": str(end)}))
            self.assertEqual(st, 200, body)
            return sorted(x["node"] for x in json.loads(body)["data"])
        self.assertEqual(nodes(self.now - 60 * NS, self.now + NS), ["new"])
        self.assertEqual(nodes(self.now - 3 * 3600 * NS, self.now + NS), ["new", "old"])
        self.assertEqual(nodes(self.now - 3 * 3600 * NS, self.now - 3600 * NS), ["old"])

    def test_split_cost_is_off_unless_asked_and_counts_lokis_pieces(self):
        """Loki's query frontend cuts a query into one piece per split_queries_by_interval,
        aligned to it: [00:30, 03:00) is the pieces of hours 0, 1 and 2."""
        hour = 3600 * NS
        at = (self.now // hour - 48) * hour
        self.d.query('{job="none"}', start=at + hour // 2, end=at + 3 * hour)
        self.assertEqual(json.loads(self.d.req("GET", "/-/stats")[1])["split_pieces"], 0)
        d = Double("--split-cost-ms", "1", "--max-query-parallelism", "4")
        try:
            for start, end, pieces in ((at + hour // 2, at + 3 * hour, 3), (at, at + 45 * 24 * hour, 1080),
                                       (at, at + 1, 1)):
                before = json.loads(d.req("GET", "/-/stats")[1])["split_pieces"]
                self.assertEqual(d.query('{job="none"}', start=start, end=end)[0], 200)
                self.assertEqual(json.loads(d.req("GET", "/-/stats")[1])["split_pieces"] - before, pieces)
            # A series request (metadata) goes in pieces of split_metadata_queries_by_interval, 24 h,
            # aligned to days: hours 0:30 to 3:00 of a day are one piece (hours near midnight two).
            day = 24 * hour
            two_days_ago = (self.now // day - 2) * day
            for start, end, pieces in ((self.now // day * day - 45 * day, self.now // day * day, 45),
                                       (two_days_ago + hour // 2, two_days_ago + 3 * hour, 1),
                                       (two_days_ago - hour // 2, two_days_ago + hour, 2)):
                before = json.loads(d.req("GET", "/-/stats")[1])["split_pieces"]
                q = urllib.parse.urlencode({"match[]": '{job="none"}', "start": start, "end": end})
                self.assertEqual(d.req("GET", "/loki/api/v1/series?" + q)[0], 200)
                self.assertEqual(json.loads(d.req("GET", "/-/stats")[1])["split_pieces"] - before, pieces)
        finally:
            d.close()

    def test_faults(self):
        self.d.req("POST", "/-/fault", json.dumps({"mode": "status", "status": 503, "count": 1}).encode())
        self.assertEqual(self.d.push_json([({"job": "f"}, [[str(self.now), "x"]])])[0], 503)
        self.assertEqual(self.d.push_json([({"job": "f"}, [[str(self.now), "x"]])])[0], 204)

    def test_a_fault_with_min_bytes_refuses_only_large_pushes_for_as_long_as_it_is_set(self):
        self.d.req("POST", "/-/fault", json.dumps({"mode": "status", "status": 429, "body": "Too Many Requests\n",
                                                    "min_bytes": 500}).encode())
        big = [({"job": "f"}, [[str(self.now + i), "y" * 100] for i in range(10)])]
        for _ in range(3):
            self.assertEqual(self.d.push_json(big), (429, "Too Many Requests\n"))
        self.assertEqual(self.d.push_json([({"job": "f"}, [[str(self.now), "x"]])])[0], 204)


class AuthAndRateTest(unittest.TestCase):
    def test_tenant_header_required_when_auth_is_on(self):
        d = Double("--auth")
        try:
            now = time.time_ns()
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])]), (401, "no org id\n"))
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])], {"X-Scope-OrgID": "a/b"}),
                             (400, "tenant ID 'a/b' contains unsupported character '/'\n"))
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])], {"X-Scope-OrgID": ".."}),
                             (400, "tenant ID is '.' or '..'\n"))
            self.assertEqual(d.push_json([({"job": "t"}, [[str(now), "x"]])], {"X-Scope-OrgID": "t1|t2"}),
                             (400, "multiple org IDs present\n"))
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


def stored(d):
    return {s["labels"].get("s", ""): [e[1] for e in s["entries"]] for s in d.store()}


class Loki3Reference(unittest.TestCase):
    """Probe by probe, what the reference file says a real Loki 3.4.6 answered."""

    def test_s1_only_the_last_streams_ingester_error_is_answered(self):
        d = Double("--per-stream-rate-kb", "64", "--per-stream-burst-kb", "64")  # "perstream"
        try:
            now = time.time_ns()
            A = lambda name: ({"s": name}, [[str(now + i), "a" * 1000] for i in range(100)])
            B = lambda name: ({"s": name}, [[str(now), "short"]])
            self.assertEqual(d.push_json([A("a1"), B("b1")]), (204, ""))  # A lost, unsaid
            st, body = d.push_json([B("b2"), A("a2")])
            self.assertEqual(st, 429)
            lines = body.split("\n")
            self.assertEqual(len(lines), 12)  # 10 entry lines, the trailer, the final ''
            self.assertTrue(lines[0].startswith("entry with timestamp "), lines[0])
            self.assertIn("ignored, reason: 'Per stream rate limit exceeded (limit: 64KB/sec) while attempting to "
                          "ingest for stream '{s=\"a2\", service_name=\"unknown_service\"}' totaling 1000B, consider "
                          "splitting a stream via additional labels", lines[0])
            self.assertTrue(lines[0].endswith("limit can be increased',"), lines[0])
            self.assertEqual(lines[10], "user 'fake', total ignored: 100 out of 100 for stream: "
                                        '{s="a2", service_name="unknown_service"}')
            self.assertEqual(d.push_json([B("b3"), A("a3"), B("c3")]), (204, ""))
            got = stored(d)
            self.assertEqual(sorted(got), ["b1", "b2", "b3", "c3"])  # no A stream stored at all
            # 40 x 1000 B fits the 64 KB burst once; the same again at once is refused whole.
            forty = ({"s": "f"}, [[str(now + i), "f" * 1000] for i in range(40)])
            self.assertEqual(d.push_json([forty])[0], 204)
            forty2 = ({"s": "f"}, [[str(now + 100 + i), "f" * 1000] for i in range(40)])
            st, body = d.push_json([forty2])
            self.assertEqual(st, 429)
            self.assertTrue(body.endswith("total ignored: 40 out of 40 for stream: "
                                          '{s="f", service_name="unknown_service"}\n'))
            self.assertEqual(len(stored(d)["f"]), 40)
        finally:
            d.close()

    def test_s12_after_a_restart_the_first_refusal_names_8EB_the_next_the_configured_limit(self):
        d = Double("--per-stream-rate-kb", "64", "--per-stream-burst-kb", "64")  # "perstream"
        try:
            now = time.time_ns()
            seed = ({"s": "t1burst"}, [[str(now), "seed"]])
            self.assertEqual(d.push_json([seed]), (204, ""))
            self.assertEqual(d.req("POST", "/-/restart", b"")[0], 204)
            burst = lambda k: ({"s": "t1burst"}, [[str(now + k * 1000 + i), "%d %s" % (i, "b" * 1000)]
                                                  for i in range(128)])
            st, body = d.push_json([burst(1)])
            self.assertEqual(st, 429)
            self.assertIn("Per stream rate limit exceeded (limit: 8EB/sec) while attempting to ingest for stream "
                          "'{s=\"t1burst\", service_name=\"unknown_service\"}'", body)
            self.assertTrue(body.endswith("total ignored: 128 out of 128 for stream: "
                                          '{s="t1burst", service_name="unknown_service"}\n'), body)
            st, body = d.push_json([burst(2)])
            self.assertEqual(st, 429)
            self.assertIn("(limit: 64KB/sec)", body)
            self.assertNotIn("8EB", body)
            # What was stored before the restart is still there; a stream new since names 64KB at once.
            self.assertEqual(stored(d)["t1burst"], ["seed"])
            st, body = d.push_json([({"s": "new"}, [[str(now + i), "n" * 1000] for i in range(128)])])
            self.assertEqual(st, 429)
            self.assertIn("(limit: 64KB/sec)", body)
        finally:
            d.close()

    def test_s12_limits_are_printed_in_lokis_units(self):
        import importlib.util
        spec = importlib.util.spec_from_file_location("loki_double", os.path.join(HERE, "loki_double.py"))
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
        self.assertEqual([m.loki_bytes(n) for n in (512, 64 << 10, 3 << 20, 1536 << 10, 2 << 40, 1 << 50, 2 ** 63)],
                         ["512B", "64KB", "3MB", "1.5MB", "2TB", "1PB", "8EB"])

    def test_s1_a_validation_error_shows_only_when_the_last_stream_was_accepted(self):
        d = Double("--per-stream-rate-kb", "64", "--per-stream-burst-kb", "64")
        try:
            now = time.time_ns()
            L = ({"s": "L"}, [[str(now), "l" * 300000], [str(now + 1), "short"]])
            A = ({"s": "A"}, [[str(now + i), "a" * 1000] for i in range(100)])
            st, body = d.push_json([L, A])
            self.assertEqual(st, 429)
            self.assertNotIn("Max entry size", body)
            L2 = ({"s": "L2"}, [[str(now), "l" * 300000], [str(now + 1), "short"]])
            A2 = ({"s": "A2"}, [[str(now + i), "a" * 1000] for i in range(100)])
            st, body = d.push_json([A2, L2])
            self.assertEqual((st, body), (400, "Max entry size '262144' bytes exceeded for stream "
                                               "'{s=\"L2\", service_name=\"unknown_service\"}' while adding an entry "
                                               "with length '300000' bytes\n"))
            self.assertEqual(stored(d), {"L": ["short"], "L2": ["short"]})
        finally:
            d.close()

    def test_s2_tenant_rate_covers_the_whole_push_and_leaves_out_invalid_lines(self):
        d = Double("--ingestion-rate-mb", "1", "--burst-mb", "2", "--max-line-size", "2048")  # "strict"
        try:
            now = time.time_ns()
            streams = [({"s": "s%d" % k}, [[str(now + i), "x" * 1000] for i in range(500)]) for k in range(5)]
            streams[0][1].append([str(now + 999), "y" * 3000])
            st, body = d.push_json(streams)
            self.assertEqual((st, body), (429, "Ingestion rate limit exceeded for user fake (limit: 1048576 bytes/sec) "
                                               "while attempting to ingest '2500' lines totaling '2500000' bytes, "
                                               "reduce log volume or contact your Loki administrator to see if the "
                                               "limit can be increased\n"))
            self.assertEqual(stored(d), {})
            one = [({"s": "p1"}, [[str(now + i), "x" * 1000] for i in range(1500)])]
            self.assertEqual(d.push_json(one)[0], 204)
            two = [({"s": "p2"}, [[str(now + i), "x" * 1000] for i in range(1500)])]
            self.assertEqual(d.push_json(two)[0], 429)
        finally:
            d.close()

    def test_s3_s4_validation_errors_are_grouped(self):
        d = Double("--max-line-size", "2048", "--reject-old-samples-max-age", "3600")
        try:
            now = time.time_ns()
            lab = '{probe="p3", service_name="unknown_service"}'
            st, body = d.push_json([({"probe": "p3"}, [[str(now + i), "y" * (3000 if i % 2 else 10)] for i in range(13)])])
            self.assertEqual((st, body), (400, "6 errors like: Max entry size '2048' bytes exceeded for stream '%s' "
                                               "while adding an entry with length '3000' bytes\n" % lab))
            self.assertEqual(len(stored(d)[""]), 7)
            st, body = d.push_json([({"probe": "p3"}, [[str(now + 100), "y" * 2100], [str(now + 101), "y" * 2101]])])
            self.assertEqual(st, 400)
            self.assertEqual(sorted(body.rstrip("\n").split("; ")),
                             ["1 errors like: Max entry size '2048' bytes exceeded for stream '%s' while adding an "
                              "entry with length '%d' bytes" % (lab, n) for n in (2100, 2101)])
            old = now - 2 * 3600 * NS
            old -= old % NS
            st, body = d.push_json([({"probe": "p3"}, [[str(old + i), "old %d" % i] for i in range(100)] +
                                     [[str(now + 200), "fresh"]])])
            self.assertEqual(st, 400)
            self.assertTrue(body.startswith("100 errors like: entry for stream '%s' has timestamp too old: " % lab))
            self.assertEqual(body.count("errors like"), 1)
        finally:
            d.close()

    def test_s5_too_far_behind_lists_ten_entries_and_counts_all(self):
        d = Double()
        try:
            now = time.time_ns()
            self.assertEqual(d.push_json([({"probe": "p5"}, [[str(now), "newest"]])])[0], 204)
            behind = [[str(now - 2 * 3600 * NS + i * NS), "old %d" % i] for i in range(30)]
            st, body = d.push_json([({"probe": "p5"}, behind + [[str(now + i), "ok %d" % i] for i in range(3)])])
            self.assertEqual(st, 400)
            lines = body.split("\n")
            self.assertEqual(len(lines), 12)
            self.assertTrue(all("entry too far behind, entry timestamp is: " in l for l in lines[:10]))
            self.assertEqual(lines[10], "user 'fake', total ignored: 30 out of 33 for stream: "
                                        '{probe="p5", service_name="unknown_service"}')
            self.assertEqual(stored(d)[""], ["newest", "ok 0", "ok 1", "ok 2"])
            # Another stream after it answers for the push: S's rejection goes unsaid.
            st, body = d.push_json([({"probe": "p5"}, [[str(now - 3 * 3600 * NS), "unsaid"]]),
                                    ({"probe": "p5b"}, [[str(now), "fresh"]])])
            self.assertEqual((st, body), (204, ""))
        finally:
            d.close()

    def test_s6_duplicates_keep_the_first(self):
        d = Double()
        try:
            t = str(time.time_ns())
            self.assertEqual(d.push_json([({"s": "d"}, [[t, "x1"], [t, "x2"], [t, "x1"]])])[0], 204)
            self.assertEqual(d.push_json([({"s": "d"}, [[t, "x1", {"k": "2"}]])])[0], 204)
            self.assertEqual(stored(d)["d"], ["x1", "x2"])
            store = json.loads(d.req("GET", "/-/store")[1])
            self.assertEqual(store[0]["entries"][0][2], {})
        finally:
            d.close()

    def test_s8_s9_labels_loki_adds(self):
        d = Double()
        try:
            now = time.time_ns()
            self.assertEqual(d.push_json([({"job": "smjob"}, [[str(now), "level=error msg=boom"], [str(now + 1), "plain"]]),
                                          ({"foo": "bar"}, [[str(now), '{"level":"info","msg":"json line"}']]),
                                          ({"level": "debug", "foo": "lvl"}, [[str(now), "level=error but label"]]),
                                          ({"job": ""}, [[str(now), "empty"]])])[0], 204)
            doc = json.loads(d.query('{service_name=~".+"}', direction="forward")[1])
            got = {r["values"][0][1]: r["stream"] for r in doc["data"]["result"]}
            self.assertEqual(got["level=error msg=boom"], {"job": "smjob", "service_name": "smjob",
                                                           "detected_level": "error"})
            self.assertEqual(got["plain"]["detected_level"], "unknown")
            self.assertEqual(got['{"level":"info","msg":"json line"}']["detected_level"], "info")
            self.assertEqual(got['{"level":"info","msg":"json line"}']["service_name"], "unknown_service")
            self.assertEqual(got["level=error but label"]["detected_level"], "debug")
            self.assertEqual(got["empty"], {"service_name": "unknown_service", "detected_level": "unknown"})
            self.assertEqual(d.push_json([]), (422, "error at least one valid stream is required for ingestion\n"))
        finally:
            d.close()


    # Section 11 ran on "generous": per-stream 64MB/128MB, tenant 256MB/512MB.
    GENEROUS = ["--ingestion-rate-mb", "256", "--burst-mb", "512", "--per-stream-rate-mb", "64",
                "--per-stream-burst-mb", "128"]

    @staticmethod
    def replay(pushes, gap_s, probe, *extra):
        """Section 11's pushes of 20000 x 100 B lines (2 MB) into one stream, straight into the
        double's Loki on a clock of our own: push k at t0 + k x gap_s, t0 half a second past a
        whole second (the rate store polls half a second after the ingesters publish). Returns
        the stream's series after each push and the entries stored per series at the end."""
        sys.path.insert(0, HERE)
        import loki_double
        loki = loki_double.Loki(loki_double.parse_args(list(Loki3Reference.GENEROUS) + list(extra)))
        t0 = (time.time_ns() // NS - 120) * NS + NS // 2
        series_after = []
        for k in range(pushes):
            now = t0 + int(k * gap_s * NS)
            entries = [(now - 60 * NS + k * 20000 + i, "%07d " % (k * 20000 + i) + "x" * 92, {}) for i in range(20000)]
            loki.push("fake", [('{probe="%s", run="R"}' % probe, entries)], now)
            series_after.append(sorted(labels.get("__stream_shard__", "") for labels, _ in
                                       loki.select("fake", '{probe="%s"}' % probe, 0, 1 << 62)))
        count = {labels.get("__stream_shard__", ""): len(es)
                 for labels, es in loki.select("fake", '{probe="%s"}' % probe, 0, 1 << 62)}
        return series_after, count

    def test_s11_a_stream_sent_slowly_is_never_sharded(self):
        series_after, count = self.replay(3, 4.0, "p11slow")
        self.assertEqual(series_after, [[""], [""], [""]])  # 1 series each time, no __stream_shard__
        self.assertEqual(count, {"": 60000})

    def test_s11_a_fast_stream_is_sharded_as_observed(self):
        # 12 pushes of 2 MB with 0.3 s pauses (a push taking 0.1 s): the rate store has not seen
        # the stream for pushes 1-3; push 4 is sharded 4 ways, from push 9 on 5 ways; the
        # unsharded series keeps the first three pushes.
        series_after, count = self.replay(12, 0.4, "p11fast")
        self.assertEqual(series_after[:3], [[""]] * 3)
        self.assertEqual(series_after[3:8], [["", "0", "1", "2", "3"]] * 5)
        self.assertEqual(series_after[8:], [["", "0", "1", "2", "3", "4"]] * 4)
        self.assertEqual(count, {"": 60000, "0": 41000, "1": 41000, "2": 41000, "3": 41000, "4": 16000})

    def test_s11_sharding_can_be_turned_off(self):
        series_after, count = self.replay(12, 0.4, "p11off", "--no-shard-streams")
        self.assertEqual(series_after, [[""]] * 12)
        self.assertEqual(count, {"": 240000})

    def test_s11_shards_over_http_in_series_labels_values_and_query_results(self):
        d = Double(*self.GENEROUS)
        try:
            base = time.time_ns() - 60 * NS
            sent, sharded = [], None
            for k in range(12):
                vals = [[str(base + k * 20000 + i), "%07d " % (k * 20000 + i) + "x" * 92] for i in range(20000)]
                sent += [v[1] for v in vals]
                self.assertEqual(d.push_json([({"probe": "p11", "run": "R"}, vals)]), (204, ""))
                series = json.loads(d.req("GET", "/loki/api/v1/series?" + urllib.parse.urlencode(
                    {"match[]": '{probe="p11"}'}))[1])["data"]
                shards = sorted(s["__stream_shard__"] for s in series if "__stream_shard__" in s)
                if k == 0:
                    self.assertEqual(series, [{"probe": "p11", "run": "R", "service_name": "unknown_service"}])
                if shards:
                    sharded = k
                    break
                time.sleep(0.3)
            self.assertIsNotNone(sharded, "12 pushes of 2 MB 0.3 s apart were never sharded")
            self.assertGreater(sharded, 0)  # never before the rate store has seen the stream
            self.assertEqual(shards, [str(i) for i in range(len(shards))])
            self.assertIn({"probe": "p11", "run": "R", "service_name": "unknown_service"}, series)  # kept
            self.assertIn("__stream_shard__", json.loads(d.req("GET", "/loki/api/v1/labels")[1])["data"])
            self.assertEqual(json.loads(d.req("GET", "/loki/api/v1/label/__stream_shard__/values")[1])["data"], shards)
            doc = json.loads(d.query('{probe="p11"}', limit=2)[1])  # backward: the newest, from shards
            self.assertEqual(sum(len(r["values"]) for r in doc["data"]["result"]), 2)
            self.assertTrue(all("__stream_shard__" in r["stream"] for r in doc["data"]["result"]), doc)
            # Entry by entry round robin: two neighbours of one push are in two shards.
            self.assertEqual(len(doc["data"]["result"]), 2)
            # Every line stored once, across the unsharded series and the shards.
            store = json.loads(d.req("GET", "/-/store")[1])
            got = sorted(e[1] for s in store if s["labels"]["probe"] == "p11" for e in s["entries"])
            self.assertEqual(got, sorted(sent))
        finally:
            d.close()

if __name__ == "__main__":
    unittest.main(verbosity=2)
