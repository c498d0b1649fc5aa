#!/usr/bin/python3
"""A Loki test double that behaves like Loki on the wire (../shared/reference: Loki API and the
responses observed from a real Loki 2.7/3.x). Written from the protocol, independently of
jobtrail's encoder: protobuf is decoded here by hand from the wire format (field numbers of
logproto.PushRequest), so a wrong field in our .proto cannot hide on both sides.

  loki_double.py [--port N] [--port-file F] [--auth] [--ingestion-rate-mb 4] ...

Endpoints: POST /loki/api/v1/push (snappy protobuf, JSON, gzip/deflate), GET /loki/api/v1/query_range,
/loki/api/v1/series, /loki/api/v1/labels, /loki/api/v1/label/<name>/values, /ready.
--split-cost-ms N makes long queries cost what they cost a real Loki: N ms per split_queries_by_interval
piece, max_query_parallelism pieces of a tenant at a time (see Splitter).
Loki 3.4's automatic stream sharding is on, as in Loki (--no-shard-streams turns it off,
--shard-desired-rate-kb sets desired_rate, 1536 by default): a stream sent faster than that is
stored as __stream_shard__="0".."N-1" streams beside its unsharded one (see StreamRates).
Metric queries (count_over_time, sum by) are not supported: query_range answers 400.
Test controls: POST /-/fault {"mode": "status"|"slow"|"reset"|"big"|"none", "status": 500, "body": "...",
"count": N, "delay": S, "target": "push"|"query", "query_contains": "...", "bytes": N, "length": true,
"min_bytes": N}
("big": a body of N bytes, as a broken proxy might send; "length": false sends it without a
Content-Length, to the end of the connection); GET /-/store (everything stored, exactly); GET /-/stats; POST /-/reset;
POST /-/restart (as Loki restarted: the store kept, rate limits afresh, the first per-stream refusal of a
stream stored before names "8EB", reference §12).
"""
import argparse, bisect, gzip, heapq, itertools, json, math, re, sys, threading, time, zlib
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse, parse_qs

import snappy

NS = 1_000_000_000
LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*$")



def go_duration(ns):
    """Go's time.Duration.String() for a query length: 800h0m0s, 2160h0m58.992s."""
    h, rest = divmod(ns, 3600 * NS)
    m, rest = divmod(rest, 60 * NS)
    sec = ("%d.%09d" % divmod(rest, NS)).rstrip("0").rstrip(".")
    return "%dh%dm%ss" % (h, m, sec)


def model_duration(seconds):
    """Prometheus model.Duration.String(), as Loki prints its limits: 721h is 30d1h."""
    ms, out = seconds * 1000, ""
    for unit, mult, exact in (("y", 365 * 86400000, True), ("w", 7 * 86400000, True), ("d", 86400000, False),
                              ("h", 3600000, False), ("m", 60000, False), ("s", 1000, False), ("ms", 1, False)):
        if exact and ms % mult:
            continue
        if ms // mult:
            out += "%d%s" % (ms // mult, unit)
            ms -= ms // mult * mult
    return out or "0s"

class PushError(Exception):
    def __init__(self, status, body):
        super().__init__(body)
        self.status, self.body = status, body


# ---------------------------------------------------------------- protobuf wire format (by hand)
def _varint(buf, pos):
    shift = result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf):
    """Yields (field_number, wire_type, value) of one message."""
    pos = 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == 0:
            val, pos = _varint(buf, pos)
        elif wt == 2:
            n, pos = _varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated length-delimited field")
            val, pos = buf[pos:pos + n], pos + n
        elif wt == 1:
            val, pos = buf[pos:pos + 8], pos + 8
        elif wt == 5:
            val, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("unsupported wire type %d" % wt)
        yield field, wt, val


def decode_push_proto(buf):
    """logproto.PushRequest{streams=1: StreamAdapter{labels=1, entries=2: EntryAdapter{
    timestamp=1: Timestamp{seconds=1, nanos=2}, line=2, structuredMetadata=3: {name=1, value=2}}}}"""
    streams = []
    for f, wt, v in _fields(buf):
        if f != 1 or wt != 2:
            continue
        labels, entries = "", []
        for sf, swt, sv in _fields(v):
            if sf == 1 and swt == 2:
                labels = sv.decode("utf-8", "replace")
            elif sf == 2 and swt == 2:
                ts, line, sm = 0, b"", {}
                for ef, ewt, ev in _fields(sv):
                    if ef == 1 and ewt == 2:
                        secs = nanos = 0
                        for tf, twt, tv in _fields(ev):
                            if tf == 1 and twt == 0:
                                secs = tv if tv < 1 << 63 else tv - (1 << 64)
                            elif tf == 2 and twt == 0:
                                nanos = tv
                        ts = secs * NS + nanos
                    elif ef == 2 and ewt == 2:
                        line = ev
                    elif ef == 3 and ewt == 2:
                        name = value = ""
                        for pf, pwt, pv in _fields(ev):
                            if pf == 1 and pwt == 2:
                                name = pv.decode("utf-8", "replace")
                            elif pf == 2 and pwt == 2:
                                value = pv.decode("utf-8", "replace")
                        sm[name] = value
                entries.append((ts, line.decode("utf-8", "replace"), sm))
        streams.append((labels, entries))
    return streams


def decode_push_json(body):
    try:
        doc = json.loads(body)
    except ValueError as e:
        raise PushError(400, "loghttp.PushRequest.Streams: []*loghttp.Stream: %s\n" % e)
    streams = []
    for s in doc.get("streams") or []:
        labels = s.get("stream") or {}
        entries = []
        for v in s.get("values") or []:
            if not isinstance(v, list) or len(v) < 2 or not isinstance(v[0], str) or not isinstance(v[1], str):
                raise PushError(400, "loghttp.PushRequest.Streams: []*loghttp.Stream: unmarshalerDecoder: Value looks "
                                     "like Number/Boolean/None, but can't find its end: ',' or '}' symbol\n")
            try:
                ts = int(v[0])
            except ValueError:
                raise PushError(400, "loghttp.PushRequest.Streams: []*loghttp.Stream: unmarshalerDecoder: Value looks "
                                     "like Number/Boolean/None, but can't find its end: ',' or '}' symbol\n")
            entries.append((ts, v[1], dict(v[2]) if len(v) > 2 and isinstance(v[2], dict) else {}))
        streams.append((format_labels(labels), entries))
    return streams


# ---------------------------------------------------------------- labels and LogQL selectors
def format_labels(d):
    return "{" + ", ".join('%s="%s"' % (k, str(v).replace("\\", "\\\\").replace('"', '\\"'))
                           for k, v in sorted(d.items())) + "}"


def parse_labels(text):
    """Prometheus text form, as LogQL's ParseLabels: {a="b", c="d"}. Returns a list of pairs."""
    s = text.strip()
    if not s.startswith("{") or not s.endswith("}"):
        raise PushError(400, "1:1: parse error: unexpected input, expected {\n")
    pairs, i, n = [], 1, len(s) - 1
    while i < n:
        while i < n and s[i] in " ,":
            i += 1
        if i >= n:
            break
        j = i
        while j < n and (s[j].isalnum() or s[j] == "_"):
            j += 1
        name = s[i:j]
        if not name or name[0].isdigit() or j >= n or s[j] not in "= ":
            bad = s[j] if j < n and name else s[i]
            raise PushError(400, "1:%d: parse error: unexpected character inside braces: '%s'\n" % (j + 1, bad))
        while j < n and s[j] == " ":
            j += 1
        if s[j] != "=" or j + 1 >= n or s[j + 1] != '"':
            raise PushError(400, "1:%d: parse error: unexpected character inside braces: '%s'\n" % (j + 1, s[j]))
        j += 2
        val = []
        while j < n and s[j] != '"':
            if s[j] == "\\" and j + 1 < n:
                j += 1
            val.append(s[j])
            j += 1
        if j >= n:
            raise PushError(400, "1:%d: parse error: unterminated quoted string\n" % (j + 1))
        pairs.append((name, "".join(val)))
        i = j + 1
    return pairs


SELECTOR = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*')


def parse_query(q):
    """Stream selector plus line filters (|= != |~ !~) and label filters (| name="v") on
    structured metadata. Enough LogQL for jobtrail's queries; anything else is a 400."""
    q = q.strip()
    if not q.startswith("{"):
        raise PushError(400, "parse error : syntax error: unexpected IDENTIFIER\n")
    end = q.find("}")
    if end < 0:
        raise PushError(400, "parse error at line 1, col %d: syntax error: unexpected $end, expecting } or ,\n"
                        % (len(q) + 1))
    matchers = []
    for part in filter(None, [p for p in re.split(r',(?=(?:[^"]*"[^"]*")*[^"]*$)', q[1:end])]):
        m = SELECTOR.fullmatch(part)
        if not m:
            raise PushError(400, "parse error : unexpected character in selector: %r\n" % part)
        matchers.append((m.group(1), m.group(2), m.group(3).encode().decode("unicode_escape")))
    if not matchers:
        raise PushError(400, "parse error : queries require at least one regexp or equality matcher that does not "
                             "have an empty-compatible value\n")
    pipeline, rest = [], q[end + 1:]
    stage = re.compile(r'\s*(\|=|!=|\|~|!~)\s*"((?:[^"\\]|\\.)*)"|\s*\|\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"')
    while rest.strip():
        m = stage.match(rest)
        if not m:
            raise PushError(400, "parse error : unsupported pipeline stage: %r\n" % rest.strip())
        if m.group(1):
            pipeline.append(("line", m.group(1), m.group(2).encode().decode("unicode_escape")))
        else:
            pipeline.append(("label", m.group(3), m.group(4), m.group(5).encode().decode("unicode_escape")))
        rest = rest[m.end():]
    return matchers, pipeline


def match_value(op, actual, want):
    if op == "=":
        return actual == want
    if op == "!=":
        return actual != want
    ok = re.fullmatch(want, actual or "") is not None
    return ok if op == "=~" else not ok


# ---------------------------------------------------------------- the store
class Bucket:
    def __init__(self, rate, burst):
        self.rate, self.burst, self.tokens, self.t = rate, burst, burst, time.monotonic()

    def take(self, n):
        now = time.monotonic()
        self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
        self.t = now
        if n > self.tokens:
            return False
        self.tokens -= n
        return True


def rfc3339(ns):
    return datetime.fromtimestamp(ns // NS, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def go_time(ns):
    frac = ("%09d" % (ns % NS)).rstrip("0")
    return datetime.fromtimestamp(ns // NS, timezone.utc).strftime("%Y-%m-%d %H:%M:%S") + \
        ("." + frac if frac else "") + " +0000 UTC"


# Where Loki 3 takes service_name from (discover_service_name), in its order.
SERVICE_NAME_LABELS = ["service", "app", "application", "app_name", "name", "app_kubernetes_io_name", "container",
                       "container_name", "k8s_container_name", "component", "workload", "job", "k8s_job_name"]


def entry_bytes(e):
    """What Loki's rate limits count of an entry: the line and its structured metadata."""
    _, line, sm = e
    return len(line.encode()) + sum(len(k) + len(v) for k, v in sm.items())


def loki_bytes(n):
    """A byte size as Loki prints its limits (reference §12): B, KB, MB, GB, TB, PB, EB, 1 KB = 1024 B;
    whole numbers without decimals ("64KB", "8EB")."""
    units = ["B", "KB", "MB", "GB", "TB", "PB", "EB"]
    i = 0
    while i + 1 < len(units) and n >= 1024 ** (i + 1):
        i += 1
    v = n / 1024 ** i
    return ("%d%s" % (v, units[i])) if v == int(v) else ("%.1f%s" % (v, units[i]))


# After a restart Loki replays its WAL without limits (NoLimitsStrategy, rate.Inf): a stream that
# existed before names that infinite rate, printed as 8 exbibytes, in its first per-stream refusal.
REPLAYED_RATE = 2 ** 63


def reason_of(text):
    """The double's own count of why it refused an entry (for /-/stats; tests compare the
    shipper's metrics with it)."""
    for needle, reason in (("timestamp too old", "too_old"), ("timestamp too new", "too_new"),
                           ("Max entry size", "line_too_long"), ("label names; limit", "label_names"),
                           ("structured metadata", "structured_metadata"), ("label value too long", "labels"),
                           ("label name too long", "labels")):
        if needle in text:
            return reason
    return "other"


def group_errors(errors):
    """Loki 3's distributor: identical texts merge into 'N errors like: <text>', different texts
    are joined by '; ' and then all get the prefix; a lone single error has none."""
    if len(errors) == 1 and next(iter(errors.values())) == 1:
        return next(iter(errors)) + "\n"
    return "; ".join("%d errors like: %s" % (n, t) for t, n in errors.items()) + "\n"


def detected_level(labels, line):
    """Loki 3's discover_log_levels: the stream's level label, else a logfmt or JSON level field."""
    if labels.get("level"):
        return labels["level"]
    m = re.search(r'(?:^|\s)level=("?)([A-Za-z]+)\1(?:\s|$)', line) or re.search(r'"level"\s*:\s*"([A-Za-z]+)"', line)
    if not m:
        return "unknown"
    v = m.group(m.lastindex).lower()
    return {"warning": "warn", "err": "error", "eror": "error", "crit": "critical", "dbg": "debug", "inf": "info"}.get(v, v)


SHARD_LABEL = "__stream_shard__"


class StreamRates:
    """Loki 3.4's automatic stream sharding (shard_streams, on by default; reference section 11)
    needs each stream's recent rate, which Loki learns late and smoothed: the ingester adds up the
    bytes and pushes of each of its streams for one second, then publishes that second; the
    distributor's rate store polls the ingesters every second (here half a second after they
    publish), sums the shards of one stream, and keeps a moving average (0.4 new, 0.6 old; a
    stream that sent nothing decays by 0.6; forgotten after 10 minutes). A stream the rate store
    has not seen yet has a push rate of 0 and is never sharded. All driven by the push's own
    clock (now_ns), so the double's own tests can replay the reference's timing exactly."""

    SMOOTHING = 0.4
    KEEP_ALIVE_NS = 600 * NS

    def __init__(self):
        self.window = {}     # (tenant, unsharded labels) -> [bytes, {shard stream: pushes}] of the current second
        self.published = {}  # the ingester's last whole second, as the rate store will read it
        self.rates = {}      # (tenant, unsharded labels) -> [rate bytes/s, pushes/s, updated at ns]
        self.done_ns = None  # every tick up to here has been run
        self.last_shard = {}  # (tenant, unsharded labels) -> Loki's shardTracker

    @staticmethod
    def unsharded(tenant, labels):
        return tenant, format_labels({k: v for k, v in labels.items() if k != SHARD_LABEL})

    def _poll(self, at_ns):
        for k, (rate, pushes) in self.published.items():
            old = self.rates.get(k)
            if old:
                rate = self.SMOOTHING * rate + (1 - self.SMOOTHING) * old[0]
                pushes = self.SMOOTHING * pushes + (1 - self.SMOOTHING) * old[1]
            self.rates[k] = [rate, pushes, at_ns]
        for k, r in list(self.rates.items()):
            if at_ns - r[2] > self.KEEP_ALIVE_NS:
                del self.rates[k]
            elif k not in self.published:
                r[0] *= 1 - self.SMOOTHING
                r[1] *= 1 - self.SMOOTHING

    def advance(self, now_ns):
        """Runs the ingesters' publishes (at whole seconds) and the rate store's polls (half a
        second later) that fell due up to now_ns, in time order."""
        if self.done_ns is None:
            self.done_ns = now_ns
            return
        t = self.done_ns
        while True:
            publish = (t // NS + 1) * NS
            poll = (t - NS // 2) // NS * NS + NS + NS // 2
            nxt = min(publish, poll)
            if nxt > now_ns:
                break
            if nxt == publish:
                self.published = {k: (b, max(p.values())) for k, (b, p) in self.window.items()}
                self.window = {}
            else:
                self._poll(nxt)
            t = nxt
            if not self.window and not self.published and now_ns - t > 2 * NS:
                # Nothing sent for a while: only decay and expiry are left; in one step.
                polls = (now_ns - t) // NS
                for k, r in list(self.rates.items()):
                    if now_ns - r[2] > self.KEEP_ALIVE_NS:
                        del self.rates[k]
                    else:
                        r[0] *= (1 - self.SMOOTHING) ** polls
                        r[1] *= (1 - self.SMOOTHING) ** polls
                t += polls * NS
        self.done_ns = max(t, self.done_ns)

    def record(self, tenant, labels, nbytes, now_ns):
        """The ingester's rate calculator: bytes a (shard) stream stored in this push."""
        w = self.window.setdefault(self.unsharded(tenant, labels), [0, {}])
        w[0] += nbytes
        shard = labels.get(SHARD_LABEL, "")
        w[1][shard] = w[1].get(shard, 0) + 1

    def shard_count(self, tenant, labels, push_size, desired_rate):
        """Loki's shardCountFor: ceil((rate + push size x min(push rate, 1)) / desired rate),
        never sharded before the rate store has seen the stream, 1 when that is at most 1."""
        rate, pushes, _ = self.rates.get(self.unsharded(tenant, labels), (0, 0, 0))
        if pushes == 0 or desired_rate <= 0:
            return 1
        shards = (int(rate) + int(push_size * min(pushes, 1.0))) / desired_rate
        return 1 if shards <= 1 else math.ceil(shards)


class Splitter:
    """What a long query costs a real Loki (off unless --split-cost-ms): its query frontend cuts a
    query_range request into one piece per split_queries_by_interval (aligned to it, 1 h by
    default) and a series request into one per split_metadata_queries_by_interval (24 h: "metadata
    queries are split using a 24h interval by default", Loki PR 11897; each an index lookup, no
    chunk read, charged here as a log piece all the same), and the queriers run
    max_query_parallelism pieces of a tenant at a time (32), each piece a lookup and a scan even
    where it finds nothing. Here each piece holds one
    of the tenant's slots for --split-cost-ms, so N pieces of one tenant's queries in flight take
    about ceil(N / parallelism) x the cost, whichever queries they belong to."""

    def __init__(self, a):
        self.a, self.lock, self.slots, self.pieces_run = a, threading.Lock(), {}, 0

    def pieces(self, start, end, interval):
        step = interval * NS
        return max(1, (end - 1) // step - start // step + 1) if end > start else 1

    def run(self, tenant, start, end, metadata=False):
        if self.a.split_cost_ms <= 0:
            return
        n = self.pieces(start, end, self.a.split_metadata_queries_by_interval if metadata
                        else self.a.split_queries_by_interval)
        with self.lock:
            slots = self.slots.setdefault(tenant, threading.BoundedSemaphore(self.a.max_query_parallelism))
            self.pieces_run += n
        pieces_left = iter(range(n))
        take = threading.Lock()

        def worker():
            while True:
                with take:
                    if next(pieces_left, None) is None:
                        return
                with slots:
                    time.sleep(self.a.split_cost_ms / 1000)
        workers = [threading.Thread(target=worker) for _ in range(min(n, self.a.max_query_parallelism))]
        for w in workers:
            w.start()
        for w in workers:
            w.join()


class Loki:
    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.splitter = Splitter(a)
        self.reset()

    def reset(self):
        self.streams = {}  # (tenant, labels text) -> {"labels": dict, "entries": [(ts, line, sm)], "keys": set}
        self.rate = {}
        self.stream_rate = {}
        self.replayed = set()  # streams replayed from the WAL at the last restart, not yet re-limited
        self.sharding = StreamRates()
        self.stats = {"pushes": 0, "by_status": {}, "entries_received": 0, "entries_stored": 0, "duplicates": 0,
                      "rejected": {}}
        self.fault = {"mode": "none"}

    def restart(self):
        """Loki restarted (reference §12): what was stored stays (its WAL is replayed), the rate
        limiters start afresh, and each stream that existed names the replay's unlimited rate in
        its first per-stream refusal."""
        self.rate = {}
        self.stream_rate = {}
        self.sharding = StreamRates()
        self.replayed = set(self.streams)

    def push(self, tenant, streams, now_ns):
        """Loki 3.4's distributor, then its ingester (reference sections 1-6, 8): validation
        errors are grouped; the tenant's rate covers the whole push's valid entries at once; the
        per-stream rate covers a stream's whole share at once; the reply follows the ingester's
        result for the *last* stream it was given, so an earlier stream's rejection goes unsaid."""
        a = self.a
        if not streams:
            raise PushError(422, "error at least one valid stream is required for ingestion\n")
        errors = {}  # distributor validation texts -> count, in first-seen order
        valid = []   # (key, labels, canon, [(ts, line, sm)])
        total = 0

        def err(text):
            errors[text] = errors.get(text, 0) + 1

        parsed = []
        for labels_text, entries in streams:
            try:
                pairs = parse_labels(labels_text) if labels_text.strip() not in ("", "{}") else []
            except PushError as e:
                raise PushError(400, "couldn't parse labels: " + e.body)  # the whole push is refused
            parsed.append((pairs, entries))
        for pairs, entries in parsed:
            total += len(entries)
            labels = {k: v for k, v in pairs if v != ""}
            if "service_name" not in labels:
                labels["service_name"] = next((labels[n] for n in SERVICE_NAME_LABELS if n in labels),
                                              "unknown_service")
            canon = format_labels(labels)
            if len(labels) - 1 > a.max_label_names:
                err("entry for stream '%s' has %d label names; limit %d" % (canon, len(labels) - 1, a.max_label_names))
                continue
            long_name = [k for k in labels if len(k) > a.max_label_name_len]
            if long_name:
                err("stream '%s' has label name too long: '%s'" % (canon, long_name[0]))
                continue
            too_long = [v for v in labels.values() if len(v) > a.max_label_value_len]
            if too_long:
                err("stream '%s' has label value too long: '%s'" % (canon, too_long[0]))
                continue
            key = (tenant, canon)
            if key not in self.streams:
                active = sum(1 for t, _ in self.streams if t == tenant)
                if active >= a.max_streams:
                    raise PushError(429, "Maximum active stream limit exceeded, reduce the number of active streams "
                                         "(reduce labels or reduce label values), or contact your Loki administrator "
                                         "to see if the limit can be increased\n")
            good = []
            oldest_ok = now_ns - a.reject_old_samples_max_age * NS
            for ts, line, sm in entries:
                n = len(line.encode())
                if n > a.max_line_size:
                    err("Max entry size '%d' bytes exceeded for stream '%s' while adding an entry with length '%d' "
                        "bytes" % (a.max_line_size, canon, n))
                elif ts < oldest_ok:
                    err("entry for stream '%s' has timestamp too old: %s, oldest acceptable timestamp is: %s"
                        % (canon, rfc3339(ts), rfc3339(oldest_ok)))
                elif ts > now_ns + a.creation_grace_period * NS:
                    err("entry for stream '%s' has timestamp too new: %s" % (canon, rfc3339(ts)))
                elif sm and not a.allow_structured_metadata:
                    err("stream '%s' includes structured metadata, but this feature is disallowed. Please see "
                        "`limits_config.structured_metadata` or contact your Loki administrator to enable it." % canon)
                else:
                    good.append((ts, line, sm))
            if good:
                valid.append((key, labels, canon, good))
        self.stats["entries_received"] += total
        if a.shard_streams:
            valid = [shard for v in valid for shard in self.shard_stream(tenant, v, now_ns)]
        # Tenant rate: the whole push's valid entries at once (the invalid ones not counted).
        size = sum(entry_bytes(e) for *_, es in valid for e in es)
        lines = sum(len(es) for *_, es in valid)
        bucket = self.rate.setdefault(tenant, Bucket(a.ingestion_rate_mb * 2**20, a.burst_mb * 2**20))
        if size and not bucket.take(size):
            self.stats["rejected"]["rate_limited"] = self.stats["rejected"].get("rate_limited", 0) + lines
            raise PushError(429, "Ingestion rate limit exceeded for user %s (limit: %d bytes/sec) while attempting to "
                                 "ingest '%d' lines totaling '%d' bytes, reduce log volume or contact your Loki "
                                 "administrator to see if the limit can be increased\n"
                                 % (tenant, a.ingestion_rate_mb * 2**20, lines, size))
        for text, n in errors.items():
            r = reason_of(text)
            self.stats["rejected"][r] = self.stats["rejected"].get(r, 0) + n
        # Ingester: each stream in push order; only the last one's result is kept.
        last = None
        window = a.max_chunk_age * NS // 2
        for key, labels, canon, good in valid:
            last = None
            st = self.streams.get(key)
            share = sum(entry_bytes(e) for e in good)
            sb = self.stream_rate.setdefault(key, Bucket(a.per_stream_rate_kb * 1024, a.per_stream_burst_kb * 1024))
            if not sb.take(share):
                # The first refusal after a restart names the replay's unlimited rate (§12).
                limit = REPLAYED_RATE if key in self.replayed else a.per_stream_rate_kb * 1024
                self.replayed.discard(key)
                lines_ = ["entry with timestamp %s ignored, reason: 'Per stream rate limit exceeded (limit: %s/sec) "
                          "while attempting to ingest for stream '%s' totaling %dB, consider splitting a stream via "
                          "additional labels or contact your Loki administrator to see if the limit can be increased',"
                          % (go_time(ts), loki_bytes(limit), canon, len(line.encode()))
                          for ts, line, _ in good[:10]]
                last = (429, lines_, len(good), len(good), canon)
                self.stats["rejected"]["per_stream_rate_limit"] = \
                    self.stats["rejected"].get("per_stream_rate_limit", 0) + len(good)
                continue
            if st is None:
                st = self.streams[key] = {"labels": labels, "entries": [], "keys": set(), "newest": 0, "order": []}
            behind, stored = [], 0
            for ts, line, sm in good:
                if st["entries"] and ts < st["newest"] - window:
                    behind.append("entry with timestamp %s ignored, reason: 'entry too far behind, entry timestamp is: "
                                  "%s, oldest acceptable timestamp is: %s'," % (go_time(ts), rfc3339(ts),
                                                                               rfc3339(st["newest"] - window)))
                    continue
                ek = (ts, line)  # a duplicate is same stream, timestamp and line; the first metadata stays
                if ek in st["keys"]:
                    self.stats["duplicates"] += 1
                    continue
                st["keys"].add(ek)
                st["entries"].append((ts, line, sm))
                # Time index (ts, arrival): queries bisect it instead of scanning the whole stream.
                bisect.insort(st["order"], (ts, len(st["entries"]) - 1))
                st["newest"] = max(st["newest"], ts)
                self.stats["entries_stored"] += 1
                stored += len(line.encode())
            if a.shard_streams:
                self.sharding.record(tenant, labels, stored, now_ns)
            if behind:
                last = (400, behind[:10], len(behind), len(good), canon)
                self.stats["rejected"]["too_far_behind"] = self.stats["rejected"].get("too_far_behind", 0) + len(behind)
        if last:
            status, lines_, ignored, of, canon = last
            raise PushError(status, "\n".join(lines_) + "\nuser '%s', total ignored: %d out of %d for stream: %s\n"
                            % (tenant, ignored, of, canon))
        if errors:
            raise PushError(400, group_errors(errors))

    def shard_stream(self, tenant, v, now_ns):
        """Loki's distributor with shard_streams on: a stream whose rate (what the rate store has
        learned, plus this push) is above desired_rate goes to N shards, each its own stream in the
        ingester, labelled __stream_shard__="0".."N-1"; entry i of the push goes to the i-th shard
        taken from where the stream's last sharded push stopped (round robin); the stream's
        unsharded series keeps what it got before."""
        key, labels, canon, good = v
        self.sharding.advance(now_ns)
        push_size = sum(len(line.encode()) for _, line, _ in good)
        n = self.sharding.shard_count(tenant, labels, push_size, self.a.shard_desired_rate_kb * 1024)
        if n <= 1:
            return [v]
        sk = self.sharding.unsharded(tenant, labels)
        count = min(n, len(good))
        start = self.sharding.last_shard.get(sk, 0)
        self.sharding.last_shard[sk] = start + count
        out = []
        for j in range(count):
            sl = dict(labels)
            sl[SHARD_LABEL] = str((start + j) % n)
            sc = format_labels(sl)
            out.append(((tenant, sc), sl, sc, good[j::count]))
        self.stats["sharded_pushes"] = self.stats.get("sharded_pushes", 0) + 1
        return out

    def select_iter(self, tenant, query, start, end, forward=True):
        """[(labels, iterator of (ts, line, sm))] for the matching streams, each iterator in time
        order (or reversed) over [start, end): lazy, so a limited query costs what it returns."""
        matchers, pipeline = parse_query(query)
        out = []
        for (t, _), st in self.streams.items():
            if t != tenant and tenant not in t.split("|"):
                continue
            if not all(match_value(op, st["labels"].get(n, ""), v) for n, op, v in matchers):
                continue
            out.append((st["labels"], self._entries(st, pipeline, start, end, forward)))
        return out

    @staticmethod
    def _entries(st, pipeline, start, end, forward):
        order = st["order"]
        lo, hi = bisect.bisect_left(order, (start, -1)), bisect.bisect_left(order, (end, -1))
        for k in (range(lo, hi) if forward else range(hi - 1, lo - 1, -1)):
            ts, line, sm = st["entries"][order[k][1]]
            ok = True
            for stage in pipeline:
                if stage[0] == "line":
                    op, s = stage[1], stage[2]
                    ok = {"|=": s in line, "!=": s not in line,
                          "|~": re.search(s, line) is not None, "!~": re.search(s, line) is None}[op]
                else:
                    _, name, op, v = stage
                    ok = match_value(op, sm.get(name, st["labels"].get(name, "")), v)
                if not ok:
                    break
            if ok:
                yield ts, line, sm

    def select(self, tenant, query, start, end):
        return [(labels, list(it)) for labels, it in self.select_iter(tenant, query, start, end)]


def parse_time(v, default):
    if v is None:
        return default
    try:
        if re.fullmatch(r"\d+", v):
            n = int(v)
            return n if n > 10**12 else n * NS
        if re.fullmatch(r"\d+\.\d+", v):
            return int(float(v) * NS)
        return int(datetime.fromisoformat(v.replace("Z", "+00:00")).timestamp() * NS)
    except ValueError:
        raise PushError(400, "cannot parse %r to a valid timestamp\n" % v)


def query_window(a, one, now):
    """A query's [start, end] (Loki's default: the last hour before end), as Loki 3.4 limits it:
    start moved up to max_query_lookback, then the length checked against max_query_length."""
    end = parse_time(one("end"), now)
    start = parse_time(one("start"), end - 3600 * NS)
    if a.max_query_lookback:
        start = max(start, now - a.max_query_lookback * NS)
    if a.max_query_length and end - start > a.max_query_length * NS:
        raise PushError(400, "the query time range exceeds the limit (query length: %s, limit: %s)"
                        % (go_duration(end - start), model_duration(a.max_query_length)))
    return start, end


# ---------------------------------------------------------------- HTTP
def make_handler(loki):
    a = loki.a

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, body=b"", ctype="text/plain; charset=utf-8"):
            if isinstance(body, str):
                body = body.encode()
            self.send_response(status)
            if status != 204:
                self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body) if status != 204 else 0))
            self.end_headers()
            if status != 204:
                self.wfile.write(body)
            with loki.lock:
                if self.path.startswith("/loki/api/v1/push"):
                    loki.stats["by_status"][str(status)] = loki.stats["by_status"].get(str(status), 0) + 1

        def tenant(self):
            t = self.headers.get("X-Scope-OrgID")
            if a.auth:
                if not t:
                    raise PushError(401, "no org id\n")
                if "|" in t:
                    if self.path.startswith("/loki/api/v1/push"):
                        raise PushError(400, "multiple org IDs present\n")
                    return t  # queries may span tenants (as the CLI's federated queries do)
                if t in (".", ".."):
                    raise PushError(400, "tenant ID is '.' or '..'\n")
                bad = next((c for c in t if not (c.isalnum() or c in "!-_.*'()")), None)
                if bad:
                    raise PushError(400, "tenant ID '%s' contains unsupported character '%s'\n" % (t, bad))
                return t
            return "fake"

        def fault(self, target="push", query="", size=0):
            """The fault set by /-/fault, for pushes (default) or, with "target": "query", for
            query_range requests whose LogQL contains "query_contains"; with "min_bytes", only for
            pushes whose body is at least that large (a proxy's limit on request size or rate)."""
            with loki.lock:
                f = dict(loki.fault)
                if f.get("target", "push") != target or f.get("query_contains", "") not in query:
                    return False
                if size < int(f.get("min_bytes", 0)):
                    return False
                if f["mode"] != "none" and f.get("count") is not None:
                    loki.fault["count"] -= 1
                    if loki.fault["count"] <= 0:
                        loki.fault = {"mode": "none"}
            if f["mode"] == "slow":
                time.sleep(float(f.get("delay", 5)))
                return False
            if f["mode"] == "reset":
                self.close_connection = True
                self.connection.shutdown(2)
                return True
            if f["mode"] == "status":
                self.reply(int(f.get("status", 500)), f.get("body", "internal server error\n"))
                return True
            if f["mode"] == "big":
                n = int(f.get("bytes", 1 << 30))
                self.send_response(int(f.get("status", 200)))
                self.send_header("Content-Type", "application/json")
                if f.get("length", True):
                    self.send_header("Content-Length", str(n))
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                chunk = b" " * 65536
                try:
                    while n > 0:
                        self.wfile.write(chunk[:min(n, len(chunk))])
                        n -= len(chunk)
                except OSError:
                    pass  # the client gave up, as it should
                return True
            return False

        def body(self):
            n = int(self.headers.get("Content-Length") or 0)
            if n > a.max_recv_bytes:
                self.rfile.read(n)
                raise PushError(413, "request body too large: %d bytes, limit: %d bytes\n" % (n, a.max_recv_bytes))
            return self.rfile.read(n)

        def do_POST(self):
            u = urlparse(self.path)
            try:
                if u.path == "/-/fault":
                    with loki.lock:
                        loki.fault = json.loads(self.body() or b"{}")
                        loki.fault.setdefault("mode", "none")
                    return self.reply(204)
                if u.path == "/-/restart":
                    self.body()
                    with loki.lock:
                        loki.restart()
                    return self.reply(204)
                if u.path == "/-/reset":
                    self.body()
                    with loki.lock:
                        loki.reset()
                    return self.reply(204)
                if u.path != "/loki/api/v1/push":
                    return self.reply(404, "404 page not found\n")
                raw = self.body()
                with loki.lock:
                    loki.stats["pushes"] += 1
                    loki.stats["bytes_received"] = loki.stats.get("bytes_received", 0) + len(raw)
                if self.fault(size=len(raw)):
                    return
                tenant = self.tenant()
                enc = (self.headers.get("Content-Encoding") or "").lower()
                if enc in ("gzip",):
                    raw = gzip.decompress(raw)
                elif enc == "deflate":
                    raw = zlib.decompress(raw)
                elif enc not in ("", "snappy"):
                    raise PushError(400, 'Content-Encoding "%s" not supported\n' % enc)
                ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
                if ctype == "application/json":
                    streams = decode_push_json(raw)
                else:
                    try:
                        raw = snappy.uncompress(raw)
                    except Exception:
                        raise PushError(400, "snappy: corrupt input\n")
                    try:
                        streams = decode_push_proto(raw)
                    except ValueError as e:
                        raise PushError(400, "unexpected EOF: %s\n" % e)
                with loki.lock:
                    loki.push(tenant, streams, time.time_ns())
                self.reply(204)
            except PushError as e:
                self.reply(e.status, e.body)

        def do_GET(self):
            u = urlparse(self.path)
            q = {k: v for k, v in parse_qs(u.query).items()}
            one = lambda k, d=None: q.get(k, [d])[0]
            try:
                if u.path == "/ready":
                    return self.reply(200, "ready\n")
                if u.path == "/-/store":
                    with loki.lock:
                        doc = [{"tenant": t, "labels": st["labels"],
                                "entries": [[str(ts), line, sm] for ts, line, sm in st["entries"]]}
                               for (t, _), st in sorted(loki.streams.items())]
                    return self.reply(200, json.dumps(doc), "application/json")
                if u.path == "/-/stats":
                    with loki.lock:  # reply() takes the lock itself: not under it
                        doc = json.dumps(dict(loki.stats, streams=len(loki.streams),
                                              split_pieces=loki.splitter.pieces_run))
                    return self.reply(200, doc, "application/json")
                tenant = self.tenant()
                now = time.time_ns()
                if u.path == "/loki/api/v1/query_range":
                    if self.fault("query", one("query", "")):
                        return
                    limit = int(one("limit", "100"))
                    if limit > a.max_entries_limit:
                        raise PushError(400, "max entries limit per query exceeded, limit > "
                                             "max_entries_limit_per_query (%d > %d)\n" % (limit, a.max_entries_limit))
                    start, end = query_window(a, one, now)
                    loki.splitter.run(tenant, start, end)  # outside the lock, as Loki's queriers
                    forward = one("direction", "backward") == "forward"
                    categorize = "categorize-labels" in (self.headers.get("X-Loki-Response-Encoding-Flags") or "")
                    with loki.lock:
                        found = loki.select_iter(tenant, one("query", ""), start, end, forward)
                        # Loki's order: by time across streams; the first `limit` of the merge.
                        tagged = lambda i, es: ((ts, i, line, sm) for ts, line, sm in es)  # binds i now
                        merged = heapq.merge(*[tagged(i, es) for i, (_, es) in enumerate(found)],
                                             key=lambda x: x[0], reverse=not forward)
                        flat = list(itertools.islice(merged, limit))
                    result = {}
                    for ts, i, line, sm in flat:
                        labels = dict(found[i][0])
                        if a.discover_log_levels:  # Loki 3 stores it as structured metadata of every entry
                            sm = dict(sm, detected_level=sm.get("detected_level") or detected_level(labels, line))
                        key = (i, tuple(sorted(sm.items())) if not categorize else ())
                        if not categorize:
                            labels.update(sm)
                        r = result.setdefault(key, {"stream": labels, "values": []})
                        r["values"].append([str(ts), line, {"structuredMetadata": sm}] if categorize and sm
                                           else [str(ts), line])
                    doc = {"status": "success", "data": {"resultType": "streams", "result": list(result.values()),
                                                         "stats": {"summary": {"totalEntriesReturned": len(flat)}}}}
                    return self.reply(200, json.dumps(doc), "application/json")
                if u.path == "/loki/api/v1/series":
                    # The streams with entries in [start, end] (Loki's default: the last hour).
                    start, end = query_window(a, one, now)
                    loki.splitter.run(tenant, start, end, metadata=True)
                    out = []
                    with loki.lock:
                        for m in q.get("match[]", []):
                            for labels, es in loki.select_iter(tenant, m, start, end + 1):
                                if labels not in out and next(es, None) is not None:
                                    out.append(labels)
                    return self.reply(200, json.dumps({"status": "success", "data": out}), "application/json")
                if u.path == "/loki/api/v1/labels":
                    with loki.lock:
                        names = sorted({k for (t, _), st in loki.streams.items() if t == tenant for k in st["labels"]})
                    return self.reply(200, json.dumps({"status": "success", "data": names}), "application/json")
                m = re.fullmatch(r"/loki/api/v1/label/([^/]+)/values", u.path)
                if m:
                    with loki.lock:
                        vals = sorted({st["labels"][m.group(1)] for (t, _), st in loki.streams.items()
                                       if t == tenant and m.group(1) in st["labels"]})
                    return self.reply(200, json.dumps({"status": "success", "data": vals}), "application/json")
                self.reply(404, "404 page not found\n")
            except PushError as e:
                self.reply(e.status, e.body)

    return H


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (a lab's bridge address)")
    p.add_argument("--port-file")
    p.add_argument("--auth", action="store_true", help="require X-Scope-OrgID (auth_enabled)")
    p.add_argument("--ingestion-rate-mb", type=float, default=4)
    p.add_argument("--burst-mb", type=float, default=6)
    p.add_argument("--per-stream-rate-mb", type=float, default=3)
    p.add_argument("--per-stream-burst-mb", type=float, default=15)
    p.add_argument("--per-stream-rate-kb", type=int, help="overrides --per-stream-rate-mb (Loki's 64KB and such)")
    p.add_argument("--per-stream-burst-kb", type=int)
    p.add_argument("--max-line-size", type=int, default=256 * 1024)
    p.add_argument("--max-label-names", type=int, default=15)
    p.add_argument("--max-label-value-len", type=int, default=2048)
    p.add_argument("--max-label-name-len", type=int, default=1024)
    p.add_argument("--max-streams", type=int, default=5000)
    p.add_argument("--reject-old-samples-max-age", type=int, default=7 * 86400, help="seconds")
    p.add_argument("--creation-grace-period", type=int, default=600, help="seconds")
    p.add_argument("--max-chunk-age", type=int, default=7200, help="seconds; the too-far-behind window is half")
    p.add_argument("--max-entries-limit", type=int, default=5000)
    p.add_argument("--max-query-length", type=int, default=0, help="seconds; 0 = no limit (Loki's default: 721h)")
    p.add_argument("--max-query-lookback", type=int, default=0, help="seconds; 0 = no limit")
    p.add_argument("--max-recv-bytes", type=int, default=100 * 2**20)
    p.add_argument("--split-cost-ms", type=float, default=0,
                   help="what each split_queries_by_interval piece of a query costs (0: nothing, the default)")
    p.add_argument("--split-queries-by-interval", type=int, default=3600, help="seconds (Loki's 1h)")
    p.add_argument("--split-metadata-queries-by-interval", type=int, default=86400,
                   help="seconds, for series requests (Loki's 24h)")
    p.add_argument("--max-query-parallelism", type=int, default=32, help="pieces of a tenant run at once")
    p.add_argument("--no-shard-streams", dest="shard_streams", action="store_false",
                   help="turn off Loki's automatic stream sharding (shard_streams.enabled, on by default)")
    p.add_argument("--shard-desired-rate-kb", type=int, default=1536, help="shard_streams.desired_rate (1536KB)")
    p.add_argument("--no-discover-log-levels", dest="discover_log_levels", action="store_false")
    p.add_argument("--no-structured-metadata", dest="allow_structured_metadata", action="store_false")
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM) ...")
    p.add_argument("--tls-key", help="... and this key")
    a = p.parse_args(argv)
    a.per_stream_rate_kb = a.per_stream_rate_kb or int(a.per_stream_rate_mb * 1024)
    a.per_stream_burst_kb = a.per_stream_burst_kb or int(a.per_stream_burst_mb * 1024)
    return a


def main():
    a = parse_args()
    loki = Loki(a)
    # Loki listens with the kernel's backlog; Python's default of 5 would hold a burst of new
    # connections back by a SYN retransmit (1 s), which Loki does not.
    ThreadingHTTPServer.request_queue_size = 1024
    srv = ThreadingHTTPServer((a.host, a.port), make_handler(loki))
    srv.daemon_threads = True
    if a.tls_cert:
        import ssl
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(a.tls_cert, a.tls_key)
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    if a.port_file:
        with open(a.port_file + ".tmp", "w") as f:
            f.write(str(srv.server_address[1]))
        import os
        os.rename(a.port_file + ".tmp", a.port_file)
    print("loki-double listening on %s:%d" % (a.host, srv.server_address[1]), flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    main()
