#!/usr/bin/python3
"""The benchmark's Loki: decodes every push (snappy protobuf, or JSON) with the Loki test double's
decoders and ticks off every line by the sequence number in it ("seq N"); a line that also says
"t NS" (CLOCK_REALTIME when the writer wrote it) gives a latency sample, written -> acknowledged.
    sink.py PORT_FILE
GET /quiet: {"since_ms"} since the last push, decoding nothing.
GET /stats?n=N: {"lines", "unique", "dup", "lost", "decoded_bytes", "metadata_bytes", "entry_bytes", "pushes", "lat_ms": [p50, p99],
"first_ms"} for the lines 0..N-1 since the last POST /reset. Pushes are decoded at /stats, not when
they arrive: the sink's Python stays out of the way of the shipper (and of the latency figures)."""
import json, os, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../tests/loki_double"))
import snappy  # noqa: E402
from loki_double import decode_push_json, decode_push_proto  # noqa: E402

SEQ = re.compile(r" seq (\d+)(?: t (\d+))?")


class Tally:
    def __init__(self):
        self.mu = threading.Lock()
        self.reset()

    def reset(self):
        self.seen = {}  # seq -> times received
        self.lines = self.decoded = self.pushes = self.bad = self.undecodable = 0
        self.metadata_bytes = self.entry_bytes = 0  # of the decoded pushes: structured metadata; lines and times alone
        self.lat = []
        self.first = None  # latency of seq 0
        self.kept = []  # (content type, body, acknowledged at), decoded at the next /stats
        self.last_push_ns = 0

    def add(self, raw_len, streams, now_ns):
        with self.mu:
            self.pushes += 1
            self.decoded += raw_len
            for _, entries in streams:
                for ts, line, sm in entries:
                    self.lines += 1
                    plain, md = entry_sizes(ts, line, sm)
                    self.entry_bytes += plain
                    self.metadata_bytes += md
                    m = SEQ.search(line)
                    if not m:
                        self.bad += 1
                        continue
                    s = int(m.group(1))
                    self.seen[s] = self.seen.get(s, 0) + 1
                    if m.group(2):
                        self.lat.append((now_ns - int(m.group(2))) / 1e6)
                        if s == 0:
                            self.first = self.lat[-1]

    def stats(self, n):
        with self.mu:
            kept, self.kept = self.kept, []
        for ctype, body, acked_ns in kept:
            try:
                self.add(*decode(ctype, body), acked_ns)
            except Exception as e:
                print("sink: undecodable push: %s" % e, file=sys.stderr)
                self.undecodable += 1
        with self.mu:
            unique = sum(1 for s in self.seen if s < n)
            dup = sum(c - 1 for c in self.seen.values())
            lat = sorted(self.lat)
            pct = [lat[min(len(lat) - 1, int(len(lat) * q))] if lat else None for q in (0.5, 0.99)]
            return {"lines": self.lines, "unique": unique, "dup": dup, "lost": n - unique, "bad": self.bad, "undecodable": self.undecodable,
                    "decoded_bytes": self.decoded, "metadata_bytes": self.metadata_bytes,
                    "entry_bytes": self.entry_bytes, "pushes": self.pushes, "lat_ms": pct, "lat_n": len(lat),
                    "first_ms": self.first}


T = Tally()


def vlen(n):
    return max(1, (n.bit_length() + 6) // 7)


def entry_sizes(ts, line, sm):
    """An entry's protobuf bytes in its stream without structured metadata (its time and line:
    what Promtail sends of it, beside its stream's labels once a push), and what its metadata
    adds to that."""
    secs, nanos = divmod(ts, 1_000_000_000)
    t = (1 + vlen(secs) if secs else 0) + (1 + vlen(nanos) if nanos else 0)
    n = len(line.encode())
    plain = 1 + vlen(t) + t + 1 + vlen(n) + n
    with_md = plain
    for k, v in sm.items():
        kb, vb = len(k.encode()), len(v.encode())
        pair = 1 + vlen(kb) + kb + 1 + vlen(vb) + vb
        with_md += 1 + vlen(pair) + pair
    return 1 + vlen(plain) + plain, (1 + vlen(with_md) + with_md) - (1 + vlen(plain) + plain)


def decode(ctype, body):
    """(decoded bytes, streams) of one push."""
    if ctype.startswith("application/json"):
        return len(body), decode_push_json(body)
    raw = snappy.uncompress(body)
    return len(raw), decode_push_proto(raw)


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.startswith("/reset"):
            with T.mu:
                T.reset()
            return self.reply(204)
        ctype = self.headers.get("Content-Type") or ""
        # Kept as acknowledged (now: the reply goes out right after this) and decoded at the next
        # /stats, so the sink's Python is not in the way of the next push. A push that does not
        # decode is counted (undecodable), its lines lost.
        with T.mu:
            T.last_push_ns = time.time_ns()
            T.kept.append((ctype, body, T.last_push_ns))
        self.reply(204)

    def do_GET(self):
        u = urlparse(self.path)
        if u.path == "/quiet":
            # Cheap (nothing decoded): how long since the last push. /stats decodes in Python and
            # holds the GIL for seconds, so asked while pushes still come it would delay their
            # acknowledgements, and the latency figures would be the sink's.
            with T.mu:
                since = (time.time_ns() - T.last_push_ns) / 1e6 if T.last_push_ns else None
            return self.reply(200, json.dumps({"since_ms": since}).encode())
        n = int(parse_qs(u.query).get("n", ["0"])[0])
        self.reply(200, json.dumps(T.stats(n)).encode())


class Server(ThreadingHTTPServer):
    # Python's default listen backlog is 5: connections past it wait for a SYN retransmit (1 s,
    # then 3 s), which the latency figures would count as the shipper's. Loki's is the kernel's.
    request_queue_size = 1024
    daemon_threads = True


srv = Server(("127.0.0.1", 0), H)
with open(sys.argv[1], "w") as f:
    f.write(str(srv.server_address[1]))
srv.serve_forever()
