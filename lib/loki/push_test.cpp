#include "loki/push.hpp"

#include <snappy.h>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <random>

#include "common/time.hpp"
#include "loki/client.hpp"
#include "loki/response.hpp"
#include "loki_double.hpp"
#include "push.pb.h"
#include "spool/record.hpp"
#include "spool_frames.hpp"

using namespace jobtrail::loki;

namespace {

// The oracle's entry: what libprotobuf writes for it.
void add_entry(logproto::StreamAdapter* ps, int64_t ts_ns, const std::string& line,
               const std::vector<std::pair<std::string, std::string>>& metadata) {
    auto* pe = ps->add_entries();
    pe->mutable_timestamp()->set_seconds(ts_ns / 1'000'000'000);
    pe->mutable_timestamp()->set_nanos(static_cast<int32_t>(ts_ns % 1'000'000'000));
    pe->set_line(line);
    for (const auto& [k, v] : metadata) {
        auto* kv = pe->add_structuredmetadata();
        kv->set_name(k);
        kv->set_value(v);
    }
}

}  // namespace

TEST_CASE("label sets in Prometheus text form", "[loki]") {
    CHECK(format_labels({{"node", "gpu01"}, {"job", "kmsg"}}) == "{job=\"kmsg\", node=\"gpu01\"}");
    CHECK(format_labels({{"a", "q\"u\\o\nte"}}) == "{a=\"q\\\"u\\\\o\\nte\"}");
    CHECK(valid_label_name("job_id"));
    CHECK(valid_label_name("_x1"));
    CHECK_FALSE(valid_label_name("bad-name"));
    CHECK_FALSE(valid_label_name("1abc"));
    CHECK_FALSE(valid_label_name("__reserved"));
    CHECK_FALSE(valid_label_name(""));
}

TEST_CASE("a push reaches a Loki (test double, independent decoder) byte for byte", "[loki][double]") {
    jobtrail::test::LokiDouble loki;
    Endpoint ep;
    ep.url = loki.url();
    Client c(ep);
    const int64_t now = jobtrail::realtime_ns();
    Stream s{{{"job", "kmsg"}, {"node", "gpu01"}, {"service_name", "kmsg"}},
             {{now, "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.", {{"xid", "79"}, {"seq", "4242"}}},
              {now + 1, "second line \xe2\x82\xac", {}}}};
    auto res = c.push(encode_push({s}, true));
    INFO(res.error << res.body);
    REQUIRE(res.status == 204);
    CHECK(classify_push_response(res.status, res.body).verdict == Verdict::kAccepted);

    auto store = nlohmann::json::parse(c.get("/-/store", "").body);
    REQUIRE(store.size() == 1);
    CHECK(store[0]["labels"]["node"] == "gpu01");
    REQUIRE(store[0]["entries"].size() == 2);
    CHECK(store[0]["entries"][0][0] == std::to_string(now));
    CHECK(store[0]["entries"][0][1] == "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.");
    CHECK(store[0]["entries"][0][2]["xid"] == "79");
    CHECK(store[0]["entries"][1][1] == "second line \xe2\x82\xac");

    // The same bytes again: Loki deduplicates, the store is unchanged.
    REQUIRE(c.push(encode_push({s}, true)).status == 204);
    store = nlohmann::json::parse(c.get("/-/store", "").body);
    CHECK(store[0]["entries"].size() == 2);

    // Without structured metadata support the entries go without it.
    Stream t{{{"job", "plain"}}, {{now, "x", {{"k", "v"}}}}};
    REQUIRE(c.push(encode_push({t}, false)).status == 204);
    auto q = nlohmann::json::parse(
        c.get("/loki/api/v1/query_range", "query=" + Client::url_encode("{job=\"plain\"}") + "&start=0").body);
    // No "k": only the labels Loki 3 adds itself (service_name, detected_level) beside job.
    CHECK(q["data"]["result"][0]["stream"] ==
          nlohmann::json({{"job", "plain"}, {"service_name", "plain"}, {"detected_level", "unknown"}}));
}

TEST_CASE("transport errors and Loki errors are told apart", "[loki][double]") {
    Endpoint ep;
    ep.url = "http://127.0.0.1:9";  // discard port: nothing listens
    ep.timeout_ms = 2000;
    Client c(ep);
    auto res = c.push(encode_push(std::vector<Stream>{}, true));
    CHECK(res.status == 0);
    CHECK_FALSE(res.error.empty());
    CHECK(classify_push_response(res.status, res.body).verdict == Verdict::kRetry);

    jobtrail::test::LokiDouble loki({"--auth"});
    Endpoint ep2;
    ep2.url = loki.url();
    Client unauth(ep2);
    auto r = unauth.push(encode_push({{{{"job", "x"}}, {{jobtrail::realtime_ns(), "x", {}}}}}, true));
    CHECK(r.status == 401);
    CHECK(classify_push_response(r.status, r.body).verdict == Verdict::kAuthFailure);
    ep2.tenant = "team-a";
    Client tenant(ep2);
    CHECK(tenant.push(encode_push({{{{"job", "x"}}, {{jobtrail::realtime_ns(), "x", {}}}}}, true)).status == 204);
}

TEST_CASE("the hand-written encoder writes exactly what libprotobuf writes", "[loki]") {
    // libprotobuf (generated from the same push.proto) is the oracle: same bytes, and its parser
    // reads back every field. Edge cases: empty lines and labels, zero timestamps (proto3 omits
    // zeros), multi-byte lengths, metadata with empty values, with and without metadata.
    std::mt19937 rng(7);
    for (int round = 0; round < 200; ++round) {
        std::vector<Stream> streams(rng() % 4);
        for (auto& s : streams) {
            if (rng() % 5) s.labels = {{"job", "kmsg"}, {"node", "n" + std::to_string(rng() % 100)}};
            s.entries.resize(rng() % 6);
            for (auto& e : s.entries) {
                const int64_t choices[] = {0, 999'999'999, 1'000'000'000, 1795989142146801327, 1795989142000000000};
                e.ts_ns = choices[rng() % 5];
                e.line = std::string(rng() % 3 == 0 ? 0 : rng() % 300, static_cast<char>('a' + rng() % 26));
                for (unsigned m = rng() % 3; m > 0; --m)
                    e.metadata.emplace_back("k" + std::to_string(m), rng() % 2 ? "" : "v");
            }
        }
        const bool with_md = rng() % 2;
        logproto::PushRequest want;
        for (const auto& s : streams) {
            auto* ps = want.add_streams();
            ps->set_labels(format_labels(s.labels));
            for (const auto& e : s.entries)
                add_entry(ps, e.ts_ns, e.line, with_md ? e.metadata : decltype(e.metadata){});
        }
        std::string raw;
        REQUIRE(snappy::Uncompress(encode_push(streams, with_md).data(), encode_push(streams, with_md).size(), &raw));
        std::string oracle;
        REQUIRE(want.SerializeToString(&oracle));
        REQUIRE(raw == oracle);
        logproto::PushRequest back;
        REQUIRE(back.ParseFromString(raw));
        REQUIRE(back.streams_size() == static_cast<int>(streams.size()));
    }
}

TEST_CASE("bodies of many blocks, entries larger than a block, one scratch reused: libprotobuf's bytes", "[loki]") {
    // The body is made a block (64 KiB) at a time as snappy reads it: entries straddle blocks,
    // one entry can be bigger than several, and the scratch of one push serves the next.
    std::mt19937 rng(11);
    PushScratch scratch;
    Buffer out;
    const size_t shapes[][3] = {
        // streams, entries per stream, longest line
        {1, 3000, 300}, {5, 400, 200}, {1, 2, 300'000}, {3, 1, 0}, {1, 50, 70'000}, {0, 0, 0}, {2, 2000, 130}};
    for (const auto& shape : shapes) {
        std::vector<Stream> streams(shape[0]);
        for (auto& st : streams) {
            st.labels = {{"job", "nccl"}, {"node", "gpu" + std::to_string(rng() % 100)}};
            st.entries.resize(shape[1]);
            for (auto& e : st.entries) {
                e.ts_ns = 1795989142000000000 + static_cast<int64_t>(rng() % 1'000'000'000);
                e.line = std::string(shape[2] ? rng() % (shape[2] + 1) : 0, static_cast<char>('a' + rng() % 26));
                if (rng() % 2) e.metadata.emplace_back("step", std::to_string(rng() % 4));
            }
        }
        logproto::PushRequest want;
        std::vector<StreamRef> refs;
        std::vector<std::string> labels;
        labels.reserve(streams.size());
        for (const auto& st : streams) {
            labels.push_back(format_labels(st.labels));
            auto* ps = want.add_streams();
            ps->set_labels(labels.back());
            StreamRef r{labels.back(), {}};
            for (const auto& e : st.entries) {
                r.entries.push_back({e.ts_ns, e.line, &e.metadata});
                add_entry(ps, e.ts_ns, e.line, e.metadata);
            }
            refs.push_back(std::move(r));
        }
        size_t size = 0;
        encode_push(refs, true, scratch, out, &size);
        std::string raw;
        REQUIRE(snappy::Uncompress(out.data(), size, &raw));
        std::string oracle;
        REQUIRE(want.SerializeToString(&oracle));
        INFO("streams " << shape[0] << ", entries " << shape[1] << ", body " << oracle.size() << " bytes");
        REQUIRE(raw == oracle);
        // What was kept for the next push is a few blocks, not the body.
        CHECK(scratch.raw.capacity() <= 4 * (64 << 10));
    }
}

TEST_CASE("a push made of the spool's compressed runs as they are is libprotobuf's bytes", "[loki]") {
    // The sender puts runs' snappy elements one after another behind a literal of its own: what
    // Loki decompresses must be exactly the request libprotobuf writes for those entries. Labels
    // of every literal-length class, runs of one entry and of many, an entry over snappy's block.
    std::mt19937 rng(13);
    for (const size_t label_len : {5, 59, 60, 200, 300, 70'000}) {
        const std::string labels = "{job=\"" + std::string(label_len, 'j') + "\"}";
        std::vector<jobtrail::spool::Record> all;
        std::vector<std::string> frames;
        for (int run = 0; run < 1 + static_cast<int>(rng() % 5); ++run) {
            std::vector<jobtrail::spool::Record> recs(1 + rng() % 300);
            for (auto& r : recs) {
                r.stream = labels;
                const int64_t choices[] = {0, 999'999'999, 1'000'000'000, 1795989142146801327};
                r.ts_ns = choices[rng() % 4];
                const size_t len = rng() % 50 == 0 ? 100'000 : rng() % 3 == 0 ? 0 : rng() % 300;
                r.line = std::string(len, static_cast<char>('a' + rng() % 26)) + std::to_string(rng());
                if (rng() % 3 == 0) r.metadata.emplace_back("step", rng() % 2 ? "" : std::to_string(rng() % 4));
            }
            all.insert(all.end(), recs.begin(), recs.end());
            frames.emplace_back();
            jobtrail::spool::append_compressed_run(frames.back(), recs);
        }
        std::vector<jobtrail::spool::RecordView> views;
        std::vector<jobtrail::spool::MetadataView> md;
        std::vector<jobtrail::spool::RunView> runs;
        std::vector<std::string_view> elements;
        uint64_t raw_entries = 0;
        for (const auto& f : frames) {
            size_t used = 0;
            REQUIRE(jobtrail::spool::decode_frame(f, views, md, runs, &used) == jobtrail::spool::DecodeStatus::kOk);
            elements.push_back(runs.back().elements());
            raw_entries += runs.back().raw_size;
        }
        Buffer out;
        size_t size = 0;
        encode_push_runs(labels, elements, raw_entries, out, &size);
        logproto::PushRequest want;
        auto* ps = want.add_streams();
        ps->set_labels(labels);
        for (const auto& e : all) add_entry(ps, e.ts_ns, e.line, e.metadata);
        INFO("labels " << labels.size() << " bytes, " << frames.size() << " runs, " << all.size() << " entries");
        REQUIRE(snappy::IsValidCompressedBuffer(out.data(), size));
        std::string raw;
        REQUIRE(snappy::Uncompress(out.data(), size, &raw));
        std::string oracle;
        REQUIRE(want.SerializeToString(&oracle));
        REQUIRE(raw == oracle);
    }
}

TEST_CASE("a push of runs is libprotobuf's bytes for labels at every literal-length boundary, to the byte", "[loki]") {
    // The push header goes as one snappy literal before the runs' elements: its length less one in
    // the tag below 60, else in 1 or 2 bytes after it. Labels of each length around 60, 256 and
    // 65536 header bytes, one byte at a time, so that each boundary is hit exactly.
    std::vector<jobtrail::spool::Record> recs;
    // Lines long enough that the stream's length is a 2-byte varint all through the first two ranges.
    for (int i = 0; i < 3; ++i) recs.push_back({1795989142146801327 + i, "", "line " + std::string(100, 'l'), {}});
    for (const auto& [from, to] : {std::pair<size_t, size_t>{40, 70}, {240, 270}, {65'510, 65'540}}) {
        for (size_t len = from; len <= to; ++len) {
            const std::string labels = "{job=\"" + std::string(len - 8, 'j') + "\"}";
            for (auto& r : recs) r.stream = labels;
            std::string frame;
            jobtrail::spool::append_compressed_run(frame, recs);
            std::vector<jobtrail::spool::RecordView> views;
            std::vector<jobtrail::spool::MetadataView> md;
            std::vector<jobtrail::spool::RunView> runs;
            size_t used = 0;
            REQUIRE(jobtrail::spool::decode_frame(frame, views, md, runs, &used) == jobtrail::spool::DecodeStatus::kOk);
            const std::vector<std::string_view> elements{runs.back().elements()};
            Buffer out;
            size_t size = 0;
            encode_push_runs(labels, elements, runs.back().raw_size, out, &size);
            logproto::PushRequest want;
            auto* ps = want.add_streams();
            ps->set_labels(labels);
            for (const auto& r : recs) add_entry(ps, r.ts_ns, r.line, r.metadata);
            std::string oracle;
            REQUIRE(want.SerializeToString(&oracle));
            INFO("labels " << labels.size() << " bytes");
            std::string raw;
            REQUIRE(snappy::Uncompress(out.data(), size, &raw));
            REQUIRE(raw == oracle);
        }
    }
}
