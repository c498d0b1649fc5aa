#include "spool/record.hpp"

#include <catch2/catch.hpp>

#include "common/varint.hpp"
#include "spool_frames.hpp"

using namespace jobtrail::spool;

namespace {

// A frame around `payload`, summed right: whatever is wrong with it is inside, where the
// checksum cannot see it (a writer's bug, or bytes that happen to sum right).
std::string frame_of(const std::string& payload) {
    std::string f(kFrameHeader, '\0');
    f += payload;
    put_frame_header(f.data(), payload.size());
    return f;
}

std::string varint(uint64_t v) {
    char b[10];
    return std::string(b, jobtrail::put_varint(b, v));
}

std::string bytes(std::string_view s) {
    return varint(s.size()) + std::string(s);
}

// A compressed run's header fields and snappy block, to write back with one of them changed.
struct RunFields {
    std::string stream;
    uint64_t count = 0, line_bytes = 0, metadata_bytes = 0;
    int64_t oldest = 0;
    unsigned flags = 0;
    uint64_t raw_size = 0;
    std::string compressed;

    explicit RunFields(const std::vector<Record>& records) {
        std::string good;
        append_compressed_run(good, records);
        std::vector<RecordView> views;
        std::vector<MetadataView> md;
        std::vector<RunView> runs;
        size_t used = 0;
        REQUIRE(decode_frame(good, views, md, runs, &used) == DecodeStatus::kOk);
        REQUIRE(runs.size() == 1);
        const RunView& r = runs[0];
        stream = r.stream;
        count = r.count;
        line_bytes = r.line_bytes;
        metadata_bytes = r.metadata_bytes;
        oldest = r.oldest_ts_ns;
        flags = r.has_metadata ? 1 : 0;
        raw_size = r.raw_size;
        compressed = r.compressed;
        REQUIRE(frame() == good);  // written back unchanged, the same bytes
    }
    std::string frame() const {
        const uint64_t zigzag = (static_cast<uint64_t>(oldest) << 1) ^ static_cast<uint64_t>(oldest >> 63);
        return frame_of("\x03" + bytes(stream) + varint(count) + varint(line_bytes) + varint(metadata_bytes) +
                        varint(zigzag) + std::string(1, static_cast<char>(flags)) + varint(raw_size) + compressed);
    }
};

Record rec(int64_t ts, std::string line, std::vector<std::pair<std::string, std::string>> md = {}) {
    return {ts, "{job=\"kmsg\", node=\"n1\"}", std::move(line), std::move(md)};
}

// What decoding the frame as copies says: its status and why.
std::pair<DecodeStatus, std::string> decode(const std::string& frame) {
    std::vector<Record> out;
    size_t used = 0;
    std::string why;
    const auto st = decode_frame(frame, out, &used, &why);
    if (st != DecodeStatus::kOk) CHECK(out.empty());
    return {st, why};
}

}  // namespace

TEST_CASE("a compressed run whose header disagrees with its records is refused as corrupt", "[spool]") {
    // Out of time order on purpose: the oldest is the second record, not the first.
    const std::vector<Record> records = {rec(1'795'989'142'000'000'500, "five", {{"seq", "5"}}),
                                         rec(1'795'989'142'000'000'300, "three"),
                                         rec(1'795'989'142'000'000'400, "four", {{"file", "0.n1.7.log"}})};
    const RunFields good(records);
    CHECK(good.oldest == records[1].ts_ns);
    CHECK(good.line_bytes == 4 + 5 + 4);
    CHECK(good.metadata_bytes == 4 + 14);
    std::vector<Record> back;
    size_t used = 0;
    REQUIRE(decode_frame(good.frame(), back, &used) == DecodeStatus::kOk);
    CHECK(back == records);

    const std::string differs = "compressed run differs from its header";
    auto with = [&](auto&& change) {
        RunFields f = good;
        change(f);
        return decode(f.frame());
    };
    using P = std::pair<DecodeStatus, std::string>;
    const P corrupt_differs{DecodeStatus::kCorrupt, differs};
    CHECK(with([](RunFields& f) { ++f.count; }) == corrupt_differs);
    CHECK(with([](RunFields& f) { --f.count; }) == corrupt_differs);
    CHECK(with([](RunFields& f) { ++f.line_bytes; }) == corrupt_differs);
    CHECK(with([](RunFields& f) { --f.line_bytes; }) == corrupt_differs);
    CHECK(with([](RunFields& f) { ++f.metadata_bytes; }) == corrupt_differs);
    CHECK(with([](RunFields& f) { --f.metadata_bytes; }) == corrupt_differs);
    CHECK(with([&](RunFields& f) { f.oldest = records[0].ts_ns; }) == corrupt_differs);  // the first, not the oldest
    CHECK(with([](RunFields& f) { --f.oldest; }) == corrupt_differs);
    CHECK(with([](RunFields& f) { f.flags = 0; }) == corrupt_differs);  // it has metadata
    CHECK(with([](RunFields& f) { f.flags = 2; }) == P{DecodeStatus::kCorrupt, "malformed compressed run"});
    CHECK(with([](RunFields& f) { f.count = 0; }) == P{DecodeStatus::kCorrupt, "malformed compressed run"});
    CHECK(with([](RunFields& f) { ++f.raw_size; }) == P{DecodeStatus::kCorrupt, "compressed run of a wrong size"});
    CHECK(with([](RunFields& f) { --f.raw_size; }) == P{DecodeStatus::kCorrupt, "compressed run of a wrong size"});
    CHECK(with([](RunFields& f) { f.compressed.pop_back(); }) ==
          P{DecodeStatus::kCorrupt, "compressed run does not decompress"});

    // Without metadata, a header saying it has some is as wrong.
    const RunFields plain({rec(1'795'989'142'000'000'000, "a"), rec(1'795'989'142'000'000'001, "b")});
    CHECK(plain.flags == 0);
    RunFields flagged = plain;
    flagged.flags = 1;
    CHECK(decode(flagged.frame()) == corrupt_differs);
    REQUIRE(decode(plain.frame()).first == DecodeStatus::kOk);
}

TEST_CASE("a run header cut before its flags is malformed, not read past", "[spool]") {
    const RunFields f({rec(1'795'989'142'000'000'000, "a")});
    const std::string cut = "\x03" + bytes(f.stream) + varint(f.count) + varint(f.line_bytes) +
                            varint(f.metadata_bytes) + varint(static_cast<uint64_t>(f.oldest) << 1);
    CHECK(decode(frame_of(cut)) == std::pair{DecodeStatus::kCorrupt, std::string("malformed compressed run")});
    CHECK(decode(frame_of(cut + '\x00')) ==
          std::pair{DecodeStatus::kCorrupt, std::string("malformed compressed run")});  // flags, no size
}

TEST_CASE("older payloads summed right but malformed inside are refused, saying how", "[spool]") {
    // Payloads 1 and 2 as older shippers wrote them (record.hpp), each with one thing wrong.
    const std::string stream = "{job=\"kmsg\"}";
    const std::string one = varint(1'795'989'142'000'000'000) + bytes(stream) + bytes("a line") + varint(0);
    using P = std::pair<DecodeStatus, std::string>;
    REQUIRE(decode(frame_of("\x01" + one)).first == DecodeStatus::kOk);
    CHECK(decode(frame_of("\x01" + one + "x")) == P{DecodeStatus::kCorrupt, "trailing bytes in payload"});
    CHECK(decode(frame_of("\x01" + one.substr(0, one.size() - 1))) == P{DecodeStatus::kCorrupt, "malformed payload"});
    // Metadata said to follow that is not there.
    CHECK(decode(frame_of("\x01" + one.substr(0, one.size() - 1) + varint(1))) ==
          P{DecodeStatus::kCorrupt, "malformed payload"});
    CHECK(decode(frame_of("\x01" + one.substr(0, one.size() - 1) + varint(1) + bytes("k"))) ==
          P{DecodeStatus::kCorrupt, "malformed payload"});

    const std::string rec2 = varint(1'795'989'142'000'000'001) + bytes("second") + varint(1) + bytes("k") + bytes("v");
    std::vector<Record> back;
    size_t used = 0;
    REQUIRE(decode_frame(frame_of("\x02" + bytes(stream) + rec2 + rec2), back, &used) == DecodeStatus::kOk);
    CHECK(back.size() == 2);
    CHECK(decode(frame_of("\x02" + bytes(stream))) == P{DecodeStatus::kCorrupt, "a run without records"});
    CHECK(decode(frame_of("\x02" + bytes(stream) + rec2 + rec2.substr(0, rec2.size() - 1))) ==
          P{DecodeStatus::kCorrupt, "malformed record in a run"});
    CHECK(decode(frame_of("\x02")) == P{DecodeStatus::kCorrupt, "malformed payload"});
}
