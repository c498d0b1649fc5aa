#include "loki/response.hpp"

#include <catch2/catch.hpp>

using namespace jobtrail::loki;

// Bodies as a real Loki answered (../shared/reference/loki-observed-responses.md).
TEST_CASE("2xx is acknowledged", "[loki]") {
    CHECK(classify_push_response(204, "").verdict == Verdict::kAccepted);
    CHECK(classify_push_response(200, "").verdict == Verdict::kAccepted);
}

TEST_CASE("400 out-of-order / too-far-behind: rejected (valid entries were stored), counted", "[loki]") {
    auto r = classify_push_response(
        400,
        "entry with timestamp 2026-11-29 20:43:44.869159168 +0000 UTC ignored, reason: 'entry out of order' for "
        "stream: {job=\"ooo\", run=\"1795985044\"},\nentry with timestamp 2026-11-29 20:43:49.86916224 +0000 UTC "
        "ignored, reason: 'entry out of order' for stream: {job=\"ooo\", run=\"1795985044\"},\ntotal ignored: 2 out "
        "of 2\n");
    CHECK(r.verdict == Verdict::kRejected);
    CHECK(r.rejected["out_of_order"] == 2);
    CHECK(r.total_ignored == 2);
    CHECK(r.total_entries == 2);
    auto b = classify_push_response(400,
                                    "entry with timestamp 2026-11-29 18:44:07.26887808 +0000 UTC ignored, reason: "
                                    "'entry too far behind, oldest acceptable timestamp is: 2026-11-29T19:44:07Z' for "
                                    "stream: {job=\"unord\", run=\"1795985044\"},\ntotal ignored: 1 out of 1\n");
    CHECK(b.rejected["too_far_behind"] == 1);
}

TEST_CASE("400 validation errors by reason", "[loki]") {
    CHECK(classify_push_response(400,
                                 "entry for stream '{job=\"old\", run=\"1\"}' has timestamp too old: "
                                 "2026-11-21T12:44:04Z, oldest acceptable timestamp is: 2026-11-22T20:44:04Z\n")
              .rejected.at("too_old") == 1);
    CHECK(
        classify_push_response(400, "entry for stream '{job=\"future\"}' has timestamp too new: 2026-11-29T21:44:04Z\n")
            .rejected.at("too_new") == 1);
    CHECK(classify_push_response(400,
                                 "Max entry size '262144' bytes exceeded for stream '{job=\"long\"}' while adding an "
                                 "entry with length '307200' bytes\n")
              .rejected.at("line_too_long") == 1);
    CHECK(classify_push_response(400, "1:5: parse error: unexpected character inside braces: '-'\n")
              .rejected.at("labels") == 1);
    CHECK(classify_push_response(400, "error at least one label pair is required per stream\n").rejected.at("labels") ==
          1);
    CHECK(classify_push_response(400, "entry for stream '{l0=\"v\"}' has 31 label names; limit 30\n")
              .rejected.at("label_names") == 1);
    // Loki 3 wording (lower-case "max entry size")
    CHECK(classify_push_response(400,
                                 "max entry size '262144' bytes exceeded for stream '{a=\"b\"}' while adding an "
                                 "entry with length '300000' bytes\n")
              .rejected.at("line_too_long") == 1);
}

TEST_CASE("429, 5xx and no answer are retried, 413 splits, 401/403 are configuration errors", "[loki]") {
    auto r = classify_push_response(429,
                                    "Ingestion rate limit exceeded for user fake (limit: 4194304 bytes/sec) while "
                                    "attempting to ingest '16' lines totaling '4096000' bytes, reduce log volume or "
                                    "contact your Loki administrator to see if the limit can be increased\n");
    CHECK(r.verdict == Verdict::kRetry);
    CHECK(r.rejected["rate_limited"] == 16);  // the push's lines, all refused at once
    CHECK(r.tenant_rate_limit == 4194304);
    CHECK(r.rate_limited_bytes == 4096000);
    CHECK(classify_push_response(429,
                                 "Maximum active stream limit exceeded, reduce the number of active streams (reduce "
                                 "labels or reduce label values), or contact your Loki administrator to see if the "
                                 "limit can be increased\n")
              .rejected.at("stream_limit") == 1);
    CHECK(classify_push_response(503, "at least 1 live replicas required, could only find 0\n").verdict ==
          Verdict::kRetry);
    CHECK(classify_push_response(0, "").verdict == Verdict::kRetry);
    CHECK(classify_push_response(413, "request body too large: 1 bytes\n").verdict == Verdict::kSplit);
    CHECK(classify_push_response(401, "no org id\n").verdict == Verdict::kAuthFailure);
    CHECK(classify_push_response(403, "forbidden\n").verdict == Verdict::kAuthFailure);
    CHECK(classify_push_response(400, "snappy: corrupt input\n").verdict == Verdict::kRejected);
}

TEST_CASE("every status Loki or a proxy in front of it returns: what happens to the data", "[loki]") {
    struct Row {
        long status;
        Verdict verdict;
        const char* why;
    };
    const Row rows[] = {
        {200, Verdict::kAccepted, "a proxy's OK"},
        {201, Verdict::kAccepted, ""},
        {202, Verdict::kAccepted, ""},
        {204, Verdict::kAccepted, "Loki's success"},
        {260, Verdict::kRetry, "Loki's block_ingestion_until status: nothing stored"},
        {301, Verdict::kRetry, "a redirect (http to https): nothing stored"},
        {302, Verdict::kRetry, ""},
        {307, Verdict::kRetry, ""},
        {308, Verdict::kRetry, ""},
        {400, Verdict::kRejected, "Loki's validation: the valid entries were stored"},
        {401, Verdict::kAuthFailure, "no org id, or the gateway's basic auth"},
        {403, Verdict::kAuthFailure, ""},
        {404, Verdict::kRetry, "not Loki's push path: nothing stored"},
        {405, Verdict::kRetry, "not Loki's push path: nothing stored"},
        {407, Verdict::kAuthFailure, "a proxy wants credentials"},
        {408, Verdict::kRetry, "a proxy's request timeout"},
        {411, Verdict::kRejected, ""},
        {413, Verdict::kSplit, "Loki's or nginx's body limit"},
        {422, Verdict::kRejected, ""},
        {429, Verdict::kRetry, "rate limits"},
        {500, Verdict::kRetry, ""},
        {502, Verdict::kRetry, "a gateway without a Loki behind it"},
        {503, Verdict::kRetry, "no live ingester, circuit breaker"},
        {504, Verdict::kRetry, "a gateway's timeout"},
        {0, Verdict::kRetry, "no answer: connection refused, timeout"},
        {-1, Verdict::kRetry, ""},
    };
    for (const auto& row : rows) {
        INFO("HTTP " << row.status << " " << row.why);
        const auto r = classify_push_response(row.status, "some body\n");
        CHECK(static_cast<int>(r.verdict) == static_cast<int>(row.verdict));
        CHECK(r.status == row.status);
    }
}

TEST_CASE("the first message is kept short for one log line per batch", "[loki]") {
    auto r = classify_push_response(400, std::string(2000, 'x') + "\nsecond");
    CHECK(r.first_message.size() == 512);
}

// Loki 3.4 bodies (../shared/reference/loki3-observed-responses.md).
TEST_CASE("Loki 3 grouped validation errors count N per group", "[loki]") {
    const std::string lab = "{probe=\"p3two\", run=\"R\", s=\"a\", service_name=\"unknown_service\"}";
    auto r = classify_push_response(400, "2 errors like: Max entry size '2048' bytes exceeded for stream '" + lab +
                                             "' while adding an entry with length '3000' bytes; 2 errors like: Max "
                                             "entry size '2048' bytes exceeded for stream '" +
                                             lab + "' while adding an entry with length '3000' bytes\n");
    CHECK(r.verdict == Verdict::kRejected);
    CHECK(r.rejected.at("line_too_long") == 4);
    CHECK(r.rejected_known_bytes == 12000);
    auto m = classify_push_response(400, "1 errors like: Max entry size '2048' bytes exceeded for stream '" + lab +
                                             "' while adding an entry with length '3000' bytes; 1 errors like: entry "
                                             "for stream '" +
                                             lab +
                                             "' has timestamp too old: 2026-12-01T06:25:47Z, oldest acceptable "
                                             "timestamp is: 2026-12-01T07:25:47Z\n");
    CHECK(m.rejected.at("line_too_long") == 1);
    CHECK(m.rejected.at("too_old") == 1);
    CHECK(m.rejected_count() == 2);
    auto o = classify_push_response(400, "100 errors like: entry for stream '" + lab +
                                             "' has timestamp too old: 2026-12-01T06:23:43Z, oldest acceptable "
                                             "timestamp is: 2026-12-01T07:23:43Z\n");
    CHECK(o.rejected_count() == 100);
}

TEST_CASE("Loki 3 lists 10 entries per stream, the trailer counts them all", "[loki]") {
    std::string body;
    for (int i = 0; i < 10; ++i)
        body +=
            "entry with timestamp 2026-12-01 06:24:01.635651333 +0000 UTC ignored, reason: 'entry too far behind, "
            "entry timestamp is: 2026-12-01T06:24:01Z, oldest acceptable timestamp is: 2026-12-01T07:24:01Z',\n";
    body += "user 'fake', total ignored: 30 out of 33 for stream: {probe=\"p5\", service_name=\"unknown_service\"}\n";
    auto r = classify_push_response(400, body);
    CHECK(r.rejected.at("too_far_behind") == 30);
    CHECK(r.rejected.size() == 1);
    CHECK(r.total_ignored == 30);
    CHECK(r.total_entries == 33);
    auto p = classify_push_response(
        429,
        "entry with timestamp 2026-12-01 08:23:14.337153088 +0000 UTC ignored, reason: 'Per stream rate limit exceeded "
        "(limit: 64KB/sec) while attempting to ingest for stream '{s=\"A\"}' totaling 1000B, consider splitting a "
        "stream via additional labels or contact your Loki administrator to see if the limit can be increased',\n"
        "user 'fake', total ignored: 100 out of 100 for stream: {s=\"A\"}\n");
    CHECK(p.verdict == Verdict::kRetry);
    CHECK(p.stream_rate_limit == 64 * 1024);
    CHECK(p.rejected.at("per_stream_rate_limit") == 100);
}

namespace {
PushResponse per_stream_429_naming(const std::string& limit) {
    return classify_push_response(
        429,
        "entry with timestamp 2026-12-02 21:16:54.190000217 +0000 UTC ignored, reason: 'Per stream rate limit exceeded "
        "(limit: " +
            limit +
            "/sec) while attempting to ingest for stream '{cluster=\"lk1\", job=\"t1burst\"}' totaling 149B, consider "
            "splitting a stream via additional labels or contact your Loki administrator to see if the limit can be "
            "increased',\nuser 'fake', total ignored: 128 out of 128 for stream: {cluster=\"lk1\", job=\"t1burst\"}\n");
}
}  // namespace

TEST_CASE("a per-stream limit is read in every unit Loki prints, 8EB after a restart included", "[loki]") {
    // Reference §12: Loki prints limits with B, KB, MB, GB, TB, PB, EB, 1 KB = 1024 B. Right after a
    // restart it names the WAL replay's infinite rate, 8EB: that is 2^63 bytes a second, not 8.
    CHECK(per_stream_429_naming("512B").stream_rate_limit == 512);
    CHECK(per_stream_429_naming("64KB").stream_rate_limit == 64 * 1024);
    CHECK(per_stream_429_naming("1.5MB").stream_rate_limit == 1536 * 1024);
    CHECK(per_stream_429_naming("3GB").stream_rate_limit == 3ULL << 30);
    CHECK(per_stream_429_naming("2TB").stream_rate_limit == 2ULL << 40);
    CHECK(per_stream_429_naming("1PB").stream_rate_limit == 1ULL << 50);
    CHECK(per_stream_429_naming("8EB").stream_rate_limit == 1ULL << 63);
    CHECK(per_stream_429_naming("64KiB").stream_rate_limit == 64 * 1024);
    CHECK(per_stream_429_naming("64 KB").stream_rate_limit == 64 * 1024);
    CHECK(per_stream_429_naming("16EB").stream_rate_limit == UINT64_MAX);  // saturates, never wraps
}

TEST_CASE("a per-stream limit in a unit we do not know is no limit named, never a number of bytes", "[loki]") {
    for (const char* limit : {"8ZB", "8YB", "8XB", "8Kbit", "8 bananas", "8", "eightKB", "-64KB", "nanKB"}) {
        INFO(limit);
        const auto r = per_stream_429_naming(limit);
        CHECK(r.stream_rate_limit == 0);
        // Still a per-stream refusal of every entry, retried: nothing is dropped for it.
        CHECK(r.verdict == Verdict::kRetry);
        CHECK(r.rejected.at("per_stream_rate_limit") == 128);
    }
}

TEST_CASE("the first message is the body's first line, whole when there is no newline", "[loki]") {
    const auto r = classify_push_response(
        400,
        "entry for stream '{job=\"future\"}' has timestamp too new: 2026-12-01T09:23:43Z\nsecond line of the body\n");
    CHECK(r.first_message == "entry for stream '{job=\"future\"}' has timestamp too new: 2026-12-01T09:23:43Z");
    CHECK(classify_push_response(500, "internal error").first_message == "internal error");
}

TEST_CASE("every 3xx from 300 to 399 stored nothing and is retried while 299 is a success", "[loki]") {
    // 300 and 399 bound the 3xx range a proxy might answer; 299 is still a success.
    CHECK(classify_push_response(300, "").verdict == Verdict::kRetry);
    CHECK(classify_push_response(399, "").verdict == Verdict::kRetry);
    CHECK(classify_push_response(299, "").verdict == Verdict::kAccepted);
}

TEST_CASE("Loki 3 label refusals are label errors: name or value too long and unparsable labels", "[loki]") {
    // Reference §8: each of these wordings on its own, as Loki 3.4 answers them.
    const std::string long_value(3000, 'y'), long_name(1100, 'n');
    const std::vector<std::string> bodies = {
        "couldn't parse labels: 1:5: parse error: unexpected character inside braces: '-'\n",
        "stream '{job=\"x\", service_name=\"x\", v=\"" + long_value + "\"}' has label value too long: '" + long_value +
            "'\n",
        "stream '{job=\"x\", " + long_name + "=\"y\", service_name=\"x\"}' has label name too long: '" + long_name +
            "'\n",
        "error parsing labels {job=\"x\": 1:9: unexpected end of input\n",
    };
    for (const auto& body : bodies) {
        INFO(body.substr(0, 60));
        const auto r = classify_push_response(400, body);
        CHECK(r.verdict == Verdict::kRejected);
        CHECK(r.rejected.size() == 1);
        CHECK(r.rejected.count("labels") == 1);
        CHECK(r.rejected_count() == 1);
    }
    const auto md = classify_push_response(
        400,
        "stream '{job=\"x\"}' includes structured metadata, but this feature is disallowed. Please see "
        "`limits_config.structured_metadata` or contact your Loki administrator to enable it.\n");
    CHECK(md.rejected.at("structured_metadata") == 1);
}

TEST_CASE("a group count of any digits is read whole: 9 and 19 errors like", "[loki]") {
    // Reference §3: "N errors like: <text>" joined by "; ". Counts with a 9 in them.
    const std::string lab = "{probe=\"p3nine\", run=\"R\", service_name=\"unknown_service\"}";
    const auto r =
        classify_push_response(400, "9 errors like: Max entry size '2048' bytes exceeded for stream '" + lab +
                                        "' while adding an entry with length '3000' bytes; 19 errors like: "
                                        "entry for stream '" +
                                        lab + "' has timestamp too new: 2026-12-01T09:23:43Z\n");
    CHECK(r.rejected.at("line_too_long") == 9);
    CHECK(r.rejected.at("too_new") == 19);
    CHECK(r.rejected_known_bytes == 9 * 3000);
    CHECK(r.rejected_known_entries == 9);
}

TEST_CASE("two streams refused by the ingester each count their own trailer", "[loki]") {
    // Loki lists up to 10 entries of a stream, then "total ignored: N out of M" for it: the
    // unlisted ones are counted under that stream's reason, not the other stream's.
    std::string body;
    for (int i = 0; i < 3; ++i)
        body +=
            "entry with timestamp 2026-12-01 06:24:0" + std::to_string(i) +
            ".635651333 +0000 UTC ignored, reason: 'entry too far behind, entry timestamp is: 2026-12-01T06:24:01Z, "
            "oldest acceptable timestamp is: 2026-12-01T07:24:01Z',\n";
    body += "user 'fake', total ignored: 3 out of 5 for stream: {s=\"S\"}\n";
    for (int i = 0; i < 10; ++i)
        body +=
            "entry with timestamp 2026-12-01 08:23:14.33715308" + std::to_string(i) +
            " +0000 UTC ignored, reason: 'Per stream rate limit exceeded (limit: 64KB/sec) while attempting to ingest "
            "for stream '{s=\"A\"}' totaling 1000B, consider splitting a stream via additional labels or contact your "
            "Loki administrator to see if the limit can be increased',\n";
    body += "user 'fake', total ignored: 40 out of 40 for stream: {s=\"A\"}\n";
    const auto r = classify_push_response(429, body);
    CHECK(r.rejected.at("too_far_behind") == 3);
    CHECK(r.rejected.at("per_stream_rate_limit") == 40);
    CHECK(r.rejected.size() == 2);
    CHECK(r.total_ignored == 43);
    CHECK(r.total_entries == 45);
    CHECK(r.stream_rate_limit == 64 * 1024);
}

TEST_CASE("a unit followed by a letter is another word: every letter A to Z and a to z", "[loki]") {
    // What ends the unit is not a letter: "/sec", ")", a space. The characters either side of
    // the letter ranges ('@' '[' '`' '{') end it like any other.
    for (char c = 'A'; c <= 'Z'; ++c) {
        INFO(c);
        CHECK(per_stream_429_naming(std::string("64KB") + c).stream_rate_limit == 0);
        CHECK(per_stream_429_naming(std::string("64KB") + static_cast<char>(c - 'A' + 'a')).stream_rate_limit == 0);
    }
    for (const char c : {'@', '[', '`', '{', ' ', ')'}) {
        INFO(c);
        CHECK(per_stream_429_naming(std::string("64KB") + c).stream_rate_limit == 64 * 1024);
    }
    CHECK(per_stream_429_naming("64kB").stream_rate_limit == 64 * 1024);  // lower-case k, as in SI
}
