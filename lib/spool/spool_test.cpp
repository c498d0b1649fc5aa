#include "spool/spool.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "common/crc32.hpp"
#include "common/fs.hpp"
#include "file_size_limit.hpp"
#include "spool_frames.hpp"
#include "temp_dir.hpp"

using namespace jobtrail::spool;

namespace {

// Padding that does not compress (the spool compresses runs): sizes on disk stay what the
// tests that fill segments and disks count on.
std::string noise(size_t n, uint32_t seed) {
    std::string s(n, ' ');
    for (auto& c : s) {
        seed = seed * 1664525u + 1013904223u;
        c = static_cast<char>('!' + (seed >> 24) % 90);
    }
    return s;
}

Record rec(int i, size_t pad = 0) {
    return {1'795'989'142'000'000'000 + i,
            "{job=\"kmsg\", node=\"n1\"}",
            "line " + std::to_string(i) + noise(pad, static_cast<uint32_t>(i)),
            {{"seq", std::to_string(i)}}};
}

// Two streams by turns: each record a frame of its own (a run holds one stream's consecutive
// records), for tests that ack or damage one record.
Record alt(int i, size_t pad = 0) {
    Record r = rec(i, pad);
    if (i % 2) r.stream = "{job=\"kmsg\", node=\"n2\"}";
    return r;
}

std::vector<Record> read_all(Spool& s, Position& end) {
    std::vector<Record> out, chunk;
    while (s.read(chunk, 1000, 1 << 20, end) > 0) out.insert(out.end(), chunk.begin(), chunk.end());
    return out;
}

// A batch's records with its compressed runs expanded, as the sender splits them.
std::vector<const RecordView*> views_of(ReadBatch& b) {
    std::vector<const RecordView*> out;
    for (const auto& v : b.records()) {
        if (v.run == kNoRun) {
            out.push_back(&v);
        } else {
            std::string why;
            const bool ok = b.expand(v, out, &why);
            INFO(why);
            REQUIRE(ok);
        }
    }
    return out;
}

// A segment's records frame by frame: how many records each frame holds, and all of them in order.
std::pair<std::vector<size_t>, std::vector<Record>> segment_frames(const std::string& path) {
    std::string bytes;
    {
        std::ifstream in(path, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    std::vector<size_t> runs;
    std::vector<Record> got;
    for (std::string_view rest = bytes; !rest.empty();) {
        std::vector<Record> frame;
        size_t used = 0;
        REQUIRE(decode_frame(rest, frame, &used) == DecodeStatus::kOk);
        runs.push_back(frame.size());
        got.insert(got.end(), frame.begin(), frame.end());
        rest.remove_prefix(used);
    }
    return {runs, got};
}

}  // namespace

TEST_CASE("the frame checksum is the standard CRC-32", "[spool]") {
    // Spools written by an earlier build must still verify: the check value of CRC-32/ISO-HDLC.
    CHECK(jobtrail::crc32("123456789") == 0xCBF43926u);
    CHECK(jobtrail::crc32("") == 0u);
}

TEST_CASE("frames round-trip and reject damage", "[spool]") {
    const Record r = rec(7);
    std::vector<Record> three = {rec(1), rec(2, 300), rec(3)};
    three[1].metadata.emplace_back("file", "0.gpu01.7.log");
    three[2].metadata.clear();
    for (int version : {1, 2, 3}) {
        INFO("payload " << version);
        std::string buf;
        if (version == 1)
            append_frame(buf, r);
        else if (version == 2)
            append_run(buf, three);
        else
            append_compressed_run(buf, three);
        const std::vector<Record>& want = version == 1 ? std::vector<Record>{r} : three;
        std::vector<Record> back;
        size_t used = 0;
        int got_version = 0;
        REQUIRE(decode_frame(buf, back, &used, nullptr, &got_version) == DecodeStatus::kOk);
        CHECK(back == want);
        CHECK(got_version == version);
        CHECK(used == buf.size());
        CHECK(decode_frame(std::string_view(buf).substr(0, buf.size() - 1), back, &used) == DecodeStatus::kNeedMore);
        std::string bad = buf;
        bad[bad.size() - 2] ^= 0x20;
        std::string why;
        CHECK(decode_frame(bad, back, &used, &why) == DecodeStatus::kCorrupt);
        CHECK(why == "checksum mismatch");
        CHECK(decode_frame("XXXX" + buf.substr(4), back, &used) == DecodeStatus::kCorrupt);
        // Views: appended after what the vectors held, and nothing added when the frame is bad.
        std::vector<RecordView> views(2);
        std::vector<MetadataView> md(1);
        std::vector<RunView> runs;
        REQUIRE(decode_frame(buf, views, md, runs, &used) == DecodeStatus::kOk);
        std::string storage;
        if (version == 3) {
            // One view for the run, which says what the sender needs without decompressing it.
            REQUIRE(views.size() == 3);
            REQUIRE(runs.size() == 1);
            CHECK(views[2].run == 0);
            CHECK(views[2].stream == three[0].stream);
            CHECK(views[2].ts_ns == three[0].ts_ns);
            CHECK(runs[0].count == 3);
            CHECK(runs[0].line_bytes == three[0].line.size() + three[1].line.size() + three[2].line.size());
            CHECK(runs[0].metadata_bytes == 4 + 4 + 17);  // seq 1, seq 2, file 0.gpu01.7.log
            CHECK(runs[0].has_metadata);
            views.resize(2);
            REQUIRE(expand_run(runs[0], storage, views, md));
        }
        REQUIRE(views.size() == 2 + want.size());
        for (size_t i = 0; i < want.size(); ++i) {
            CHECK(views[2 + i].line == want[i].line);
            CHECK(views[2 + i].stream == want[i].stream);
            CHECK(views[2 + i].metadata_count == want[i].metadata.size());
        }
        views.resize(2);
        md.resize(1);
        runs.clear();
        CHECK(decode_frame(bad, views, md, runs, &used) == DecodeStatus::kCorrupt);
        CHECK(views.size() == 2);
        CHECK(md.size() == 1);
        CHECK(runs.empty());
    }
}

TEST_CASE("timestamps of every varint length come back exact, alone or followed by more", "[spool]") {
    // 1 to 10 bytes: the decoder takes eight at a time where eight are there, bytewise otherwise.
    std::vector<int64_t> stamps = {0, 1, 127, 128, 16383, 16384, -1, INT64_MIN, INT64_MAX};
    for (int bits = 7; bits <= 63; bits += 7) {
        stamps.push_back(static_cast<int64_t>((1ULL << bits) - 1));
        if (bits < 63) stamps.push_back(static_cast<int64_t>(1ULL << bits));
    }
    stamps.push_back(1'764'450'742'000'001'000);  // 2025: nine bytes
    for (const int64_t ts : stamps) {
        INFO("ts " << ts);
        for (const char* line : {"", "x", "a line of some length, longer than one varint byte's worth of 127"}) {
            std::vector<Record> recs = {Record{ts, "{job=\"t\"}", line, {}}, Record{ts ^ 1, "{job=\"t\"}", "", {}}};
            for (size_t n : {1, 2}) {
                std::vector<Record> want(recs.begin(), recs.begin() + static_cast<long>(n));
                std::string buf;
                append_run(buf, want);
                std::vector<Record> back;
                size_t used = 0;
                REQUIRE(decode_frame(buf, back, &used) == DecodeStatus::kOk);
                CHECK(back == want);
            }
        }
    }
}

TEST_CASE("a spool written one record per frame (before runs) is read on, and appending goes on in runs", "[spool]") {
    jobtrail::test::TempDir dir;
    {
        std::string old;
        for (int i = 0; i < 50; ++i) append_frame(old, rec(i, 40));
        std::ofstream(dir.path() + "/seg-0000000000000001", std::ios::binary) << old;
    }
    Spool s;
    Spool::Recovery rv;
    REQUIRE(s.open({dir.path()}, &rv));
    CHECK(rv.truncated_bytes == 0);
    for (int i = 50; i < 100; ++i) REQUIRE(s.append(rec(i, 40)) == Spool::Append::kOk);
    REQUIRE(s.sync());
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == 100);
    for (int i = 0; i < 100; ++i) CHECK(got[static_cast<size_t>(i)] == rec(i, 40));
}

TEST_CASE("a spool the previous release wrote is read back record for record", "[spool]") {
    // tests/fixtures/spool-v3 (its README says how it was made): payloads 1 and 2 as an older
    // shipper left them, then compressed runs, over two segments, the first frame acknowledged.
    // A copy: opening may cut a torn tail and acknowledging deletes segments.
    jobtrail::test::TempDir dir;
    std::filesystem::copy(std::string(JOBTRAIL_SOURCE_DIR) + "/tests/fixtures/spool-v3", dir.path());
    std::vector<int> versions;
    for (const char* seg : {"/seg-0000000000000001", "/seg-0000000000000002"}) {
        std::ifstream in(dir.path() + seg, std::ios::binary);
        const std::string bytes(std::istreambuf_iterator<char>(in), {});
        for (std::string_view rest = bytes; !rest.empty();) {
            std::vector<Record> frame;
            size_t used = 0;
            int version = 0;
            REQUIRE(decode_frame(rest, frame, &used, nullptr, &version) == DecodeStatus::kOk);
            versions.push_back(version);
            rest.remove_prefix(used);
        }
    }
    CHECK(versions == std::vector<int>{1, 1, 2, 3, 3, 3});
    const std::string kmsg = "{job=\"kmsg\", node=\"gpu01\"}";
    const std::string slurm = "{job=\"slurm\", node=\"gpu01\"}";
    const std::string nccl = "{job=\"nccl\", node=\"gpu01\", slurm_job_id=\"42\"}";
    const std::vector<Record> want = {
        // payload 1 (the one before it is acknowledged)
        {1'700'000'001'000'000'000,
         kmsg,
         "NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus.",
         {{"pci_bdf", "0000:3b:00.0"}}},
        // payload 2
        {1'700'000'002'000'000'001, slurm, "job 42 started", {{"slurm_job_id", "42"}, {"step", "batch"}}},
        {1'700'000'002'500'000'000, slurm, "job 42 step 0 started", {}},
        // payload 3: an empty line and an empty value are fields left out on the wire
        {1'700'000'003'000'000'000,
         nccl,
         "gpu01:1234:1234 [0] NCCL INFO Bootstrap : Using eth0",
         {{"file", "0.gpu01.7.log"}, {"step", "0"}}},
        {1'700'000'003'000'000'007, nccl, "", {{"file", "0.gpu01.7.log"}, {"step", "0"}, {"gpu", ""}}},
        {1'700'000'003'999'999'999,
         nccl,
         "gpu01:1234:1234 [0] NCCL INFO comm 0x5 rank 0 nranks 8",
         {{"file", "0.gpu01.7.log"}, {"step", "0"}}},
        {1'700'000'004'000'000'000,
         kmsg,
         "NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error",
         {{"pci_bdf", "0000:3b:00.0"}, {"attribution", "job"}}},
        {1'700'000'004'000'000'100, kmsg, "pcieport 0000:00:01.0: AER: Uncorrectable (Fatal) error received", {}},
        {1'700'000'005'000'000'000, slurm, "job 42 ended", {{"slurm_job_id", "42"}}},
    };
    Spool s;
    Spool::Recovery rv;
    REQUIRE(s.open({dir.path()}, &rv));
    CHECK(rv.truncated_bytes == 0);
    CHECK(rv.segments_removed == 0);
    CHECK(s.acked() == Position{1, 97});
    Position end;
    CHECK(read_all(s, end) == want);
    CHECK(end == Position{2, 344});
    CHECK(s.corrupt_skipped() == 0);
    CHECK(s.error().empty());
}

TEST_CASE("a run holds one stream's consecutive records: another stream starts a new frame", "[spool]") {
    jobtrail::test::TempDir dir;
    std::vector<Record> want;
    {
        Spool s;
        REQUIRE(s.open({dir.path()}));
        for (int i = 0; i < 30; ++i) {
            Record r = rec(i);
            if (i >= 10 && i < 20) r.stream = "{job=\"nccl\", node=\"n1\"}";
            REQUIRE(s.append(r) == Spool::Append::kOk);
            want.push_back(r);
        }
        REQUIRE(s.sync());
    }
    const auto [runs, got] = segment_frames(dir.path() + "/seg-0000000000000001");
    CHECK(runs == std::vector<size_t>{10, 10, 10});
    CHECK(got == want);
}

TEST_CASE("records come back in order, only once synced, and leave after ack", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path() + "/spool"}));
    for (int i = 0; i < 100; ++i) REQUIRE(s.append(rec(i)) == Spool::Append::kOk);
    Position end;
    std::vector<Record> got;
    CHECK(s.read(got, 1000, 1 << 20, end) == 0);  // not durable yet
    REQUIRE(s.sync());
    got = read_all(s, end);
    REQUIRE(got.size() == 100);
    for (int i = 0; i < 100; ++i) CHECK(got[static_cast<size_t>(i)] == rec(i));
    CHECK(s.pending_bytes() > 0);
    REQUIRE(s.ack(end));
    CHECK(s.pending_bytes() == 0);
    CHECK(read_all(s, end).empty());
}

TEST_CASE("after a crash, unacknowledged records are sent again byte-identical", "[spool]") {
    jobtrail::test::TempDir dir;
    Position mid;
    {
        Spool s;
        REQUIRE(s.open({dir.path()}));
        for (int i = 0; i < 10; ++i) s.append(alt(i));
        REQUIRE(s.sync());
        std::vector<Record> first;
        s.read(first, 4, 1 << 20, mid);
        REQUIRE(first.size() == 4);
        REQUIRE(s.ack(mid));
        std::vector<Record> rest;
        Position end;
        s.read(rest, 100, 1 << 20, end);  // sent, but we "die" before Loki answers
        CHECK(rest.size() == 6);
    }
    Spool again;
    REQUIRE(again.open({dir.path()}));
    CHECK(again.acked() == mid);
    Position end;
    const auto got = read_all(again, end);
    REQUIRE(got.size() == 6);
    CHECK(got.front() == alt(4));
    CHECK(got.back() == alt(9));
}

TEST_CASE("after a crash inside a run, the whole run is sent again, byte-identical", "[spool]") {
    // The sender acknowledges whole frames: a run of one stream's lines is answered for, or not.
    jobtrail::test::TempDir dir;
    Position mid;
    {
        Spool s;
        REQUIRE(s.open({dir.path()}));
        for (int i = 0; i < 10; ++i) s.append(rec(i));
        REQUIRE(s.sync());
        for (int i = 10; i < 20; ++i) s.append(rec(i));
        REQUIRE(s.sync());
        std::vector<Record> first;
        s.read(first, 4, 1 << 20, mid);  // a whole run: more than asked
        REQUIRE(first.size() == 10);
        REQUIRE(s.ack(mid));
    }
    Spool again;
    REQUIRE(again.open({dir.path()}));
    Position end;
    const auto got = read_all(again, end);
    REQUIRE(got.size() == 10);
    CHECK(got.front() == rec(10));
    CHECK(got.back() == rec(19));
}

TEST_CASE("a torn tail is cut at open and appending goes on", "[spool]") {
    jobtrail::test::TempDir dir;
    {
        Spool s;
        REQUIRE(s.open({dir.path()}));
        for (int i = 0; i < 3; ++i) s.append(rec(i));
        REQUIRE(s.sync());
    }
    // A frame half written when the process was killed.
    std::string frame;
    append_frame(frame, rec(3));
    std::ofstream(dir.path() + "/seg-0000000000000001", std::ios::app) << frame.substr(0, frame.size() / 2);
    Spool s;
    Spool::Recovery rv;
    REQUIRE(s.open({dir.path()}, &rv));
    CHECK(rv.truncated_bytes == frame.size() / 2);
    s.append(rec(4));
    REQUIRE(s.sync());
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == 4);
    CHECK(got[2] == rec(2));
    CHECK(got[3] == rec(4));
}

TEST_CASE("segments roll over and acknowledged ones are deleted", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    for (int i = 0; i < 200; ++i) s.append(rec(i, 100));
    REQUIRE(s.sync());
    CHECK(count_segments(dir.path()) > 3);
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == 200);
    CHECK(got[199] == rec(199, 100));
    REQUIRE(s.ack(end));
    CHECK(count_segments(dir.path()) == 1);
}

namespace {

std::string acked_file(const std::string& dir) {
    return jobtrail::read_small_file(dir + "/acked", 256).value_or("");
}

std::string pos_text(const Position& p) {
    return std::to_string(p.segment) + " " + std::to_string(p.offset) + "\n";
}

}  // namespace

TEST_CASE("the acknowledged position is written when due, before a segment goes, and at close", "[spool]") {
    jobtrail::test::TempDir dir;
    Position first, second, last;
    {
        Spool s;
        Options o{dir.path(), 4096};
        o.ack_persist_ms = 3'600'000;  // never due within the test
        REQUIRE(s.open(o));
        for (int i = 0; i < 6; ++i) s.append(alt(i, 10));
        REQUIRE(s.sync());
        std::vector<Record> got;
        s.read(got, 2, 1 << 20, first);
        REQUIRE(s.ack(first));
        s.read(got, 2, 1 << 20, second);
        REQUIRE(s.ack(second));
        // Not pending any more, but not written yet: a crash now sends those four again, and
        // every segment they are in is still there.
        CHECK(s.acked() == second);
        CHECK(acked_file(dir.path()) != pos_text(second));
        {
            jobtrail::test::TempDir crashed;
            REQUIRE(std::system(("cp -a " + dir.path() + "/. " + crashed.path()).c_str()) == 0);
            Spool after;
            REQUIRE(after.open({crashed.path(), 4096}));
            Position e;
            const auto all = read_all(after, e);
            REQUIRE(all.size() == 6);
            CHECK(all.front() == alt(0, 10));
        }
        REQUIRE(s.flush_ack());
        CHECK(acked_file(dir.path()) == pos_text(second));

        // Acknowledging past a segment writes at once: the segment is deleted only after.
        for (int i = 6; i < 200; ++i) s.append(alt(i, 100));
        REQUIRE(s.sync());
        REQUIRE(count_segments(dir.path()) > 3);
        const auto rest = read_all(s, last);
        REQUIRE(rest.size() == 196);
        REQUIRE(s.ack(last));
        CHECK(acked_file(dir.path()) == pos_text(last));
        CHECK(count_segments(dir.path()) == 1);
        for (int i = 200; i < 204; ++i) s.append(alt(i));
        REQUIRE(s.sync());
        s.read(got, 2, 1 << 20, last);
        REQUIRE(s.ack(last));
        CHECK(acked_file(dir.path()) != pos_text(last));
        // A position that cannot be written (here: a directory in the file's place) is not
        // taken: the segments it would free stay, and count against max_bytes.
        for (int i = 204; i < 400; ++i) s.append(alt(i, 100));
        REQUIRE(s.sync());
        const int segs = count_segments(dir.path());
        REQUIRE(segs > 3);
        const uint64_t pending = s.pending_bytes();
        Position far;
        s.read(got, 100, 1 << 20, far);
        while (far.segment <= last.segment + 1) REQUIRE(s.read(got, 100, 1 << 20, far) > 0);
        const std::string keep = dir.path() + "/acked.kept";
        REQUIRE(::rename((dir.path() + "/acked").c_str(), keep.c_str()) == 0);
        REQUIRE(::mkdir((dir.path() + "/acked").c_str(), 0700) == 0);
        REQUIRE(::mkdir((dir.path() + "/acked/x").c_str(), 0700) == 0);
        CHECK_FALSE(s.ack(far).ok);
        CHECK(count_segments(dir.path()) == segs);
        CHECK(s.pending_bytes() == pending);
        CHECK(s.acked() == last);
        REQUIRE(::rmdir((dir.path() + "/acked/x").c_str()) == 0);
        REQUIRE(::rmdir((dir.path() + "/acked").c_str()) == 0);
        REQUIRE(::rename(keep.c_str(), (dir.path() + "/acked").c_str()) == 0);
        s.rewind();
        s.read(got, 2, 1 << 20, last);
        REQUIRE(s.ack(last));
        CHECK(acked_file(dir.path()) != pos_text(last));
    }  // closed: the last position is written
    CHECK(acked_file(dir.path()) == pos_text(last));
    Spool again;
    REQUIRE(again.open({dir.path(), 4096}));
    Position end;
    const auto got = read_all(again, end);
    REQUIRE(got.size() == 196);
    CHECK(got.front() == alt(204, 100));
}

TEST_CASE("after the spool is cut back at start, what was kept is read, then what was appended since", "[spool]") {
    // At start the spool is cut back to the checkpoint: later segments go, and appending makes
    // files of the same names again.
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    for (int i = 0; i < 60; ++i) s.append(rec(i, 100));
    REQUIRE(s.sync());
    REQUIRE(count_segments(dir.path()) >= 2);
    const Position first_end{s.acked().segment, 0};
    Position end;
    std::vector<Record> got = read_all(s, end);
    REQUIRE(got.size() == 60);
    REQUIRE(end.segment > first_end.segment);
    // Keep exactly what the first segment holds.
    s.rewind();
    Position cut;
    size_t in_first = 0;
    std::vector<Record> chunk;
    while (s.read(chunk, 1, 1 << 20, cut) > 0 && cut.segment == first_end.segment) in_first += chunk.size();
    REQUIRE(in_first > 0);
    REQUIRE(s.discard_after({first_end.segment, cut.segment == first_end.segment ? cut.offset : UINT64_MAX}));
    for (int i = 1000; i < 1060; ++i) s.append(rec(i, 100));
    REQUIRE(s.sync());
    s.rewind();
    got = read_all(s, end);
    REQUIRE(got.size() >= in_first + 60);
    CHECK(got[in_first - 1] == rec(static_cast<int>(in_first) - 1, 100));
    CHECK(got[got.size() - 60] == rec(1000, 100));
    CHECK(got.back() == rec(1059, 100));
}

TEST_CASE("a spool cut back to a point inside a middle segment keeps that segment's records before it", "[spool]") {
    // The checkpoint falls inside the second of several segments: the segments after it go, the
    // records before the point in its own segment stay, and nothing after it comes back.
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    for (int i = 0; i < 150; ++i) s.append(alt(i, 100));  // two streams: a frame per record
    REQUIRE(s.sync());
    REQUIRE(count_segments(dir.path()) >= 3);
    std::vector<Position> after;  // the position after each record
    std::vector<Record> chunk;
    Position cut;
    while (s.read(chunk, 1, 1 << 20, cut) > 0) after.push_back(cut);
    REQUIRE(after.size() == 150);
    std::vector<size_t> second;  // the records whose end lies inside the second segment
    for (size_t i = 0; i < after.size(); ++i)
        if (after[i].segment != after.front().segment &&
            (second.empty() || after[i].segment == after[second[0]].segment))
            second.push_back(i);
    REQUIRE(second.size() >= 3);
    const size_t keep = second[second.size() / 2] + 1;  // records 0 .. keep-1
    REQUIRE(after[keep - 1].offset > 0);
    REQUIRE(s.discard_after(after[keep - 1]));
    s.rewind();
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == keep);
    for (size_t i = 0; i < keep; ++i) CHECK(got[i] == alt(static_cast<int>(i), 100));
    CHECK(count_segments(dir.path()) == 2);
}

using jobtrail::test::FileSizeLimit;

TEST_CASE("a write cut short by a full disk is finished by the next sync: every record once, in order", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 1 << 20}));
    for (int i = 0; i < 500; ++i) REQUIRE(s.append(rec(i, 100)) == Spool::Append::kOk);
    {
        const FileSizeLimit full(20'000);  // part of the buffered ~65 KB reaches the file
        CHECK_FALSE(s.sync());
    }
    REQUIRE(s.sync());
    Position end;
    auto got = read_all(s, end);
    REQUIRE(got.size() == 500);
    for (int i = 0; i < 500; ++i) CHECK(got[static_cast<size_t>(i)] == rec(i, 100));
    // What is on disk is what was appended: opened again, nothing is cut or read twice.
    Spool again;
    Spool::Recovery rv;
    REQUIRE(again.open({dir.path(), 1 << 20}, &rv));
    CHECK(rv.truncated_bytes == 0);
    got = read_all(again, end);
    CHECK(got.size() == 500);
}

TEST_CASE("a segment that cannot be finished for a full disk keeps the records that would start the next", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 8192}));
    {
        const FileSizeLimit full(4096);  // every roll's flush fails part way
        for (int i = 0; i < 300; ++i) CHECK(s.append(rec(i, 100)) == Spool::Append::kOk);
        const auto st = s.sync();
        CHECK_FALSE(st);
        CHECK_THAT(st.error, Catch::Matchers::Contains("write to"));
        CHECK(count_segments(dir.path()) == 1);
    }
    REQUIRE(s.sync());
    for (int i = 300; i < 400; ++i) REQUIRE(s.append(rec(i, 100)) == Spool::Append::kOk);
    REQUIRE(s.sync());
    CHECK(count_segments(dir.path()) > 1);  // rolling goes on once the disk has room
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == 400);
    for (int i = 0; i < 400; ++i) CHECK(got[static_cast<size_t>(i)] == rec(i, 100));
}

TEST_CASE("a full spool refuses appends until acknowledged data leaves", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 4096, 8192}));
    int accepted = 0;
    while (s.append(rec(accepted, 100)) == Spool::Append::kOk) ++accepted;
    CHECK(accepted > 10);
    CHECK(accepted < 100);
    REQUIRE(s.sync());
    Position end;
    read_all(s, end);
    REQUIRE(s.ack(end));
    CHECK(s.append(rec(1000, 100)) == Spool::Append::kOk);
}

TEST_CASE("records larger than a read chunk are read whole", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path()}));
    s.append(rec(1, 3 << 20));
    s.append(rec(2));
    REQUIRE(s.sync());
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == 2);
    CHECK(got[0].line.size() == std::string("line 1").size() + (3 << 20));
}

TEST_CASE("a record whose frame fills the segment to its size exactly stays in it, one byte more rolls over",
          "[spool]") {
    // segment_bytes is what a segment may hold: the roll comes when the next frame would go past
    // it, counted at the frames' bounds (a run is compressed only when it closes).
    const Record a = alt(0, 100), b = alt(1, 100);  // two streams: two frames
    auto bound = [](const Record& r) {
        return RunBuilder::frame_bound(r.stream, RunBuilder::entry_size({r.ts_ns, r.stream, r.line, &r.metadata}));
    };
    const uint64_t exact = bound(a) + bound(b);
    for (const uint64_t size : {exact, exact - 1}) {
        jobtrail::test::TempDir dir;
        Spool s;
        REQUIRE(s.open({dir.path(), size}));
        REQUIRE(s.append(a) == Spool::Append::kOk);
        REQUIRE(s.append(b) == Spool::Append::kOk);
        REQUIRE(s.sync());
        INFO("segment_bytes " << size << ", the two frames' bounds " << exact);
        CHECK(count_segments(dir.path()) == (size == exact ? 1 : 2));
        Position end;
        CHECK(read_all(s, end).size() == 2);
    }
}

TEST_CASE("one reused read batch views every record as appended, across segments and huge records", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), /*segment_bytes=*/64 << 10}));
    std::vector<Record> want;
    for (int i = 0; i < 3000; ++i) {
        // Now and then a record larger than a read chunk, and one with two metadata pairs.
        Record r = rec(i, i % 997 == 5 ? (2 << 20) : static_cast<size_t>(i % 300));
        if (i % 7 == 0) r.metadata.emplace_back("file", "0.gpu01." + std::to_string(i) + ".log");
        REQUIRE(s.append(r) == Spool::Append::kOk);
        want.push_back(std::move(r));
    }
    REQUIRE(s.sync());
    ReadBatch batch;
    Position end;
    size_t i = 0;
    int reads = 0;
    while (s.read(batch, 500, 64 << 10, end) > 0) {
        ++reads;
        for (const auto* p : views_of(batch)) {
            const RecordView& v = *p;
            REQUIRE(i < want.size());
            CHECK(v.ts_ns == want[i].ts_ns);
            CHECK(v.stream == want[i].stream);
            CHECK(v.line == want[i].line);
            const auto md = batch.metadata(v);
            REQUIRE(md.size() == want[i].metadata.size());
            for (size_t k = 0; k < md.size(); ++k) {
                CHECK(md[k].first == want[i].metadata[k].first);
                CHECK(md[k].second == want[i].metadata[k].second);
            }
            ++i;
        }
    }
    CHECK(i == want.size());
    CHECK(reads > 5);  // the batch was refilled many times (runs of up to 64 KiB come whole)
    REQUIRE(s.ack(end));
    CHECK(s.pending_bytes() == 0);
}

TEST_CASE("a reader waiting on an empty spool is woken by the commit, not by its timeout", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path()}));
    std::atomic<bool> stop{false};
    CHECK_FALSE(s.wait_readable(10, stop));  // nothing: it waits its timeout and says so
    std::thread writer([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        s.append(rec(1));
        REQUIRE(s.sync());
    });
    const auto t0 = std::chrono::steady_clock::now();
    // A minute's timeout: returning well before it means the commit woke the reader (a bound
    // on a hang, not a performance figure).
    CHECK(s.wait_readable(60'000, stop));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    writer.join();
    // Set from another thread, stop ends the wait too.
    Position end;
    std::vector<Record> got;
    REQUIRE(s.read(got, 10, 1 << 20, end) == 1);
    std::thread stopper([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        stop = true;
    });
    CHECK_FALSE(s.wait_readable(60'000, stop));
    stopper.join();
}

TEST_CASE("damage inside an older segment is skipped and reported", "[spool]") {
    jobtrail::test::TempDir dir;
    {
        Spool s;
        REQUIRE(s.open({dir.path(), 4096}));
        for (int i = 0; i < 100; ++i) s.append(rec(i, 100));
        REQUIRE(s.sync());
    }
    {
        std::fstream f(dir.path() + "/seg-0000000000000001", std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(200);
        f.write("garbage!", 8);
    }
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    Position end;
    const auto got = read_all(s, end);
    CHECK(s.corrupt_skipped() == 1);
    CHECK(got.size() < 100);
    CHECK(got.back() == rec(99, 100));
}

TEST_CASE("a frame an older segment ends inside is skipped and reported and reading goes on in the next segment",
          "[spool]") {
    // A sealed segment whose last frame the disk lost the end of: that frame needs bytes the
    // segment does not have. It is damage, not a frame still being written: the reader must not
    // wait on it for ever.
    jobtrail::test::TempDir dir;
    {
        Spool s;
        REQUIRE(s.open({dir.path(), 4096}));
        for (int i = 0; i < 100; ++i) s.append(alt(i, 100));  // streams by turns: a frame each
        REQUIRE(s.sync());
        REQUIRE(count_segments(dir.path()) > 2);
    }
    const std::string first = dir.path() + "/seg-0000000000000001";
    const auto size = std::filesystem::file_size(first);
    std::filesystem::resize_file(first, size - 10);
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    Position end;
    const auto got = read_all(s, end);
    CHECK(s.corrupt_skipped() == 1);
    CHECK(s.error().find("corrupt record in " + first + " at offset ") == 0);
    REQUIRE_FALSE(got.empty());
    CHECK(got.front() == alt(0, 100));
    CHECK(got.back() == alt(99, 100));
    CHECK(got.size() == 99);  // only the cut record is lost
}

TEST_CASE("an ack in the middle of a segment keeps that segment's rest and every later segment", "[spool]") {
    jobtrail::test::TempDir dir;
    uint64_t rest_bytes = 0;
    Position mid;
    int n = 0;  // records before mid
    {
        Spool s;
        REQUIRE(s.open({dir.path(), 4096}));
        for (int i = 0; i < 200; ++i) REQUIRE(s.append(alt(i, 100)) == Spool::Append::kOk);
        REQUIRE(s.sync());
        REQUIRE(count_segments(dir.path()) > 3);
        std::vector<Record> first;
        // Records of ~200 bytes, ~20 to a segment: read up to a point past the first segment and
        // well inside a later one, not at its start or end.
        do {
            REQUIRE(s.read(first, 1, 1 << 20, mid) == 1);
            ++n;
        } while (mid.segment < 3 || mid.offset < 1000 || mid.offset > 4096 - 1000);
        REQUIRE(s.ack(mid));
        for (int i = n; i < 200; ++i) {
            std::string frame;  // streams by turns: a run of one record each
            append_compressed_run(frame, {alt(i, 100)});
            rest_bytes += frame.size();
        }
        CHECK(s.pending_bytes() == rest_bytes);
        // A failed send reads the rest again: all of it, from the acknowledged record on.
        Position end;
        std::vector<Record> sent;
        s.read(sent, 10, 1 << 20, end);
        s.rewind();
        const auto again = read_all(s, end);
        REQUIRE(again.size() == static_cast<size_t>(200 - n));
        CHECK(again.front() == alt(n, 100));
        CHECK(again.back() == alt(199, 100));
    }
    // And after a restart.
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    CHECK(s.acked() == mid);
    CHECK(s.pending_bytes() == rest_bytes);
    Position end;
    const auto got = read_all(s, end);
    REQUIRE(got.size() == static_cast<size_t>(200 - n));
    for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == alt(static_cast<int>(i) + n, 100));
}

TEST_CASE("a damaged payload byte is caught by the checksum, the frame around it intact", "[spool]") {
    jobtrail::test::TempDir dir;
    {
        Spool s;
        REQUIRE(s.open({dir.path(), 4096}));
        for (int i = 0; i < 100; ++i) s.append(alt(i, 100));
        REQUIRE(s.sync());
    }
    // One bit of record 5's line text flips on disk: length, magic and framing stay valid, so only
    // the CRC can tell.
    const std::string seg = dir.path() + "/seg-0000000000000001";
    std::string bytes;
    {
        std::ifstream in(seg, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    const size_t at = bytes.find(alt(5, 100).line.substr(0, 16));  // a literal of its compressed run
    REQUIRE(at != std::string::npos);
    {
        std::fstream f(seg, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(at + 8));
        f.put('~');  // not in noise()
    }
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    Position end;
    const auto got = read_all(s, end);
    CHECK(s.corrupt_skipped() == 1);
    for (const auto& r : got) CHECK(r.line.find('~') == std::string::npos);  // the damaged record is not sent
    REQUIRE(got.size() >= 5);
    CHECK(got[4] == alt(4, 100));  // what came before it is
    CHECK(got.back() == alt(99, 100));
}

TEST_CASE("a full spool takes exactly what fits in max_bytes", "[spool]") {
    // Counted as written (runs, their headers, a new run in the next segment), the one being
    // appended included: never a record past the limit, and no room left for the one refused.
    for (const bool one_stream : {true, false}) {
        INFO((one_stream ? "one stream" : "two streams"));
        jobtrail::test::TempDir dir;
        Spool s;
        REQUIRE(s.open({dir.path(), 4096, 8192}));
        auto next = [&](int i) { return one_stream ? rec(i, 100) : alt(i, 100); };
        int accepted = 0;
        while (s.append(next(accepted)) == Spool::Append::kOk) ++accepted;
        CHECK(accepted > 10);
        CHECK(s.used_bytes_now() <= 8192);
        const Record refused = next(accepted);
        CHECK(s.used_bytes_now() +
                  RunBuilder::frame_bound(refused.stream, RunBuilder::entry_size({refused.ts_ns, refused.stream,
                                                                                  refused.line, &refused.metadata})) >
              8192);
        // As many as in runs of one record each, but for the one the estimate of the open run's
        // header (its longest) may leave out.
        int single = 0;
        for (uint64_t used = 0;; ++single) {
            std::string frame;
            append_compressed_run(frame, {next(single)});
            if (used + frame.size() > 8192) break;
            used += frame.size();
        }
        CHECK(accepted + 1 >= single);
        REQUIRE(s.sync());
        Position end;
        CHECK(read_all(s, end).size() == static_cast<size_t>(accepted));
    }
}

TEST_CASE("a reader keeping pace, then far behind, then catching up gets each record once, in order", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), /*segment_bytes=*/1 << 20}));
    // Reading keeps pace with writing for a while, then falls behind by megabytes and segments,
    // then catches up again; batches are kept across reads and acks, as the sender does.
    std::vector<Record> want;
    int next = 0;
    auto write = [&](int n) {
        for (int k = 0; k < n; ++k, ++next) {
            Record r = rec(next, static_cast<size_t>(1500 + next % 700));
            REQUIRE(s.append(r) == Spool::Append::kOk);
            want.push_back(std::move(r));
        }
        REQUIRE(s.sync());
    };
    std::vector<ReadBatch> held(3);
    size_t got = 0, turn = 0;
    Position end;
    auto read_some = [&](int batches) {
        for (int b = 0; b < batches; ++b) {
            ReadBatch& batch = held[turn++ % held.size()];
            if (s.read(batch, 1000, 256 << 10, end) == 0) return;
            for (const auto* p : views_of(batch)) {
                const RecordView& v = *p;
                REQUIRE(got < want.size());
                REQUIRE(v.line == want[got].line);
                REQUIRE(v.ts_ns == want[got].ts_ns);
                REQUIRE(batch.metadata(v).size() == 1);
                ++got;
            }
            REQUIRE(s.ack(end));
        }
    };
    for (int round = 0; round < 5; ++round) {
        write(300);
        read_some(2);
    }
    write(4000);  // ~8 MiB, eight segments
    read_some(1000);
    write(500);
    read_some(1000);
    CHECK(got == want.size());
    CHECK(s.pending_bytes() == 0);
    CHECK(s.error().empty());
    // The views of batches still held stay valid after their segments were acknowledged.
    for (auto& b : held)
        for (const auto* v : views_of(b)) CHECK(v->line.rfind("line ", 0) == 0);
}

TEST_CASE("a spool written in a newer format is refused at open, not cut as a torn tail", "[spool]") {
    jobtrail::test::TempDir dir;
    std::string frame;
    append_frame(frame, rec(1));
    // Payload version 9, summed right: whole, just not a format this build knows.
    frame[kFrameHeader] = '\x09';
    put_frame_header(frame.data(), frame.size() - kFrameHeader);
    std::vector<Record> back;
    size_t used = 0;
    CHECK(decode_frame(frame, back, &used) == DecodeStatus::kUnknownVersion);
    const std::string seg = dir.path() + "/seg-0000000000000001";
    std::ofstream(seg, std::ios::binary) << frame;
    Spool s;
    const auto st = s.open({dir.path()});
    CHECK_FALSE(st.ok);
    CHECK(st.error.find("newer spool format") != std::string::npos);
    std::ifstream in(seg, std::ios::binary | std::ios::ate);
    CHECK(static_cast<size_t>(in.tellg()) == frame.size());  // nothing cut
}

TEST_CASE(
    "acknowledged up to a record's frame start inside a batch, a restart reads on from that record, across segments",
    "[spool]") {
    jobtrail::test::TempDir dir;
    ReadBatch b;
    Position end;
    {
        Spool s;
        // Small segments: the batch spans three of them.
        REQUIRE(s.open({dir.path(), 300}));
        for (int i = 0; i < 12; ++i) s.append(alt(i, 100));
        REQUIRE(s.sync());
        REQUIRE(s.read(b, 1000, 1 << 20, end) == 12);
        REQUIRE(count_segments(dir.path()) >= 3);
        // Each record's frame starts where the one before it ended: in order, none shared
        // (two streams by turns make a frame each).
        for (size_t i = 1; i < 12; ++i) CHECK(b.frame_start(i - 1) < b.frame_start(i));
        CHECK(b.frame_start(0) == Position{1, 0});
        CHECK(b.frame_start(11).segment > 1);
        REQUIRE(s.ack(b.frame_start(7)));  // the first seven answered, then killed
    }
    Spool again;
    REQUIRE(again.open({dir.path(), 300}));
    const auto got = read_all(again, end);
    REQUIRE(got.size() == 5);
    CHECK(got.front() == alt(7, 100));
    CHECK(got.back() == alt(11, 100));
}

TEST_CASE("a frame of exactly the largest payload is read, one byte more is refused as a bad length", "[spool]") {
    // A payload-2 run of one stream's records, its last line sized so the payload is kMaxPayload.
    std::vector<Record> recs = {rec(1), rec(2)};
    std::string buf;
    append_run(buf, recs);
    recs[1].line.append(kMaxPayload - (buf.size() - kFrameHeader), 'x');
    buf.clear();
    append_run(buf, recs);
    // The line's length now takes more bytes to write: take those off the line.
    recs[1].line.resize(recs[1].line.size() - (buf.size() - kFrameHeader - kMaxPayload));
    buf.clear();
    append_run(buf, recs);
    REQUIRE(buf.size() - kFrameHeader == kMaxPayload);
    std::vector<Record> back;
    size_t used = 0;
    std::string why;
    REQUIRE(decode_frame(buf, back, &used, &why) == DecodeStatus::kOk);
    CHECK(back == recs);
    CHECK(used == buf.size());
    recs[1].line.push_back('x');
    buf.clear();
    append_run(buf, recs);
    REQUIRE(buf.size() - kFrameHeader == kMaxPayload + 1);
    CHECK(decode_frame(buf, back, &used, &why) == DecodeStatus::kCorrupt);
    CHECK(why == "bad length");
}

TEST_CASE("a compressed run of exactly the largest raw size is read, one byte more is refused", "[spool]") {
    // Eight lines of about 4 MiB (a shipper line's cap), the last one sized so the run's entries
    // add up to kMaxRawRun uncompressed; they compress to well under a frame's payload cap.
    std::vector<Record> recs;
    for (int i = 0; i < 8; ++i)
        recs.push_back({1'795'989'142'000'000'000 + i, "{job=\"kmsg\"}", std::string(4 << 20, 'a' + i), {}});
    const auto raw = [&] {
        size_t n = 0;
        for (const auto& r : recs) n += RunBuilder::entry_size({r.ts_ns, r.stream, r.line, &r.metadata, nullptr});
        return n;
    };
    recs.back().line.resize(recs.back().line.size() - (raw() - kMaxRawRun));
    REQUIRE(raw() == kMaxRawRun);
    std::string buf;
    append_compressed_run(buf, recs);
    std::vector<Record> back;
    size_t used = 0;
    std::string why;
    const auto st = decode_frame(buf, back, &used, &why);
    INFO(why);
    REQUIRE(st == DecodeStatus::kOk);
    CHECK(back == recs);
    recs.back().line.push_back('h');
    REQUIRE(raw() == kMaxRawRun + 1);
    buf.clear();
    append_compressed_run(buf, recs);
    CHECK(decode_frame(buf, back, &used, &why) == DecodeStatus::kCorrupt);
    CHECK(why == "malformed compressed run");
}

TEST_CASE("segments left before the acknowledged one by an interrupted ack are removed at open", "[spool]") {
    jobtrail::test::TempDir dir;
    Position end;
    std::string first;
    {
        Spool s;
        REQUIRE(s.open({dir.path(), 4096}));
        for (int i = 0; i < 100; ++i) s.append(alt(i, 100));
        REQUIRE(s.sync());
        REQUIRE(count_segments(dir.path()) > 3);
        first = jobtrail::read_small_file(dir.path() + "/seg-0000000000000001", 1 << 20).value_or("");
        REQUIRE_FALSE(first.empty());
        std::vector<Record> chunk;
        REQUIRE(s.read(chunk, 60, 1 << 20, end) == 60);
        REQUIRE(end.segment > 2);
        REQUIRE(s.ack(end));  // the segments before end's go
    }
    // As if the process died between writing "acked" and unlinking: the first segment is back.
    std::ofstream(dir.path() + "/seg-0000000000000001", std::ios::binary) << first;
    Spool s;
    Spool::Recovery rv;
    REQUIRE(s.open({dir.path(), 4096}, &rv));
    CHECK(rv.segments_removed == 1);
    CHECK_FALSE(std::filesystem::exists(dir.path() + "/seg-0000000000000001"));
    const auto got = read_all(s, end);
    REQUIRE(got.size() == 40);
    CHECK(got.front() == alt(60, 100));
}

TEST_CASE("files in the spool directory that are not named as segments are neither read nor removed", "[spool]") {
    jobtrail::test::TempDir dir;
    std::string frame;
    append_frame(frame, rec(99));
    // A segment's name is "seg-" and 16 digits, nothing more or less.
    const std::vector<std::string> others = {"seg-0000000000000002.tmp", "seg-00000000000000003", "seg-000000000000004",
                                             "segment", "seg-"};
    for (const auto& name : others) std::ofstream(dir.path() + "/" + name, std::ios::binary) << frame;
    {
        Spool s;
        Spool::Recovery rv;
        REQUIRE(s.open({dir.path()}, &rv));
        CHECK(rv.truncated_bytes == 0);
        s.append(rec(1));
        REQUIRE(s.sync());
        Position end;
        const auto got = read_all(s, end);
        CHECK(got == std::vector<Record>{rec(1)});
        REQUIRE(s.ack(end));
    }
    for (const auto& name : others) {
        INFO(name);
        CHECK(jobtrail::read_small_file(dir.path() + "/" + name, 1 << 20).value_or("") == frame);
    }
}

TEST_CASE("a read stops once its frames reach max_bytes: two frames' bytes exactly give two records, one more three",
          "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path()}));
    for (int i = 0; i < 6; ++i) s.append(alt(i, 50));  // two streams by turns: a frame each
    REQUIRE(s.sync());
    ReadBatch b;
    Position end;
    REQUIRE(s.read(b, 1000, 1 << 20, end) == 6);
    const uint64_t two = b.frame_start(2).offset;  // where the third frame starts: the first two's bytes
    REQUIRE(b.frame_start(2).segment == 1);
    s.rewind();
    REQUIRE(s.read(b, 1000, two, end) == 2);
    CHECK(b.bytes() == two);
    CHECK(end == Position{1, two});
    s.rewind();
    CHECK(s.read(b, 1000, two + 1, end) == 3);
    s.rewind();
    CHECK(s.read(b, 2, 1 << 20, end) == 2);  // and max_records frames of single records exactly
    CHECK(end == Position{1, two});
}

TEST_CASE("a run takes one stream's records up to 64 KiB of entries exactly, one byte more starts the next frame",
          "[spool]") {
    // Two records of one stream whose entries weigh 64 KiB together (the spool's bound on a run,
    // uncompressed) go in one frame; with one byte more of line, in two.
    const size_t max_run = 64 << 10;
    const auto weight = [](const Record& r) {
        return RunBuilder::entry_size({r.ts_ns, r.stream, r.line, &r.metadata, nullptr});
    };
    const Record second = rec(1);
    Record first = rec(0);
    while (weight(first) + weight(second) < max_run) first.line += 'x';
    REQUIRE(weight(first) + weight(second) == max_run);
    for (const bool over : {false, true}) {
        INFO((over ? "one byte over" : "exactly the bound"));
        if (over) first.line += 'x';
        jobtrail::test::TempDir dir;
        {
            Spool s;
            REQUIRE(s.open({dir.path()}));
            REQUIRE(s.append(first) == Spool::Append::kOk);
            REQUIRE(s.append(second) == Spool::Append::kOk);
            REQUIRE(s.sync());
        }
        const auto [runs, got] = segment_frames(dir.path() + "/seg-0000000000000001");
        CHECK(runs == (over ? std::vector<size_t>{1, 1} : std::vector<size_t>{2}));
        CHECK(got == std::vector<Record>{first, second});
    }
}

TEST_CASE("an empty spool whose max_bytes is one record's frame takes that record, one byte less refuses it",
          "[spool]") {
    // A record is counted at its frame's bound (what its run may take, compressed) until synced.
    const Record r = rec(0, 300);
    const uint64_t bound =
        RunBuilder::frame_bound(r.stream, RunBuilder::entry_size({r.ts_ns, r.stream, r.line, &r.metadata, nullptr}));
    for (const uint64_t max_bytes : {bound, bound - 1}) {
        INFO("max_bytes " << max_bytes << ", the record's bound " << bound);
        jobtrail::test::TempDir dir;
        Spool s;
        REQUIRE(s.open({dir.path(), 16 << 20, max_bytes}));
        CHECK(s.append(r) == (max_bytes == bound ? Spool::Append::kOk : Spool::Append::kFull));
        REQUIRE(s.sync());
        Position end;
        CHECK(read_all(s, end).size() == (max_bytes == bound ? 1u : 0u));
    }
}

TEST_CASE("a spool opened again reads on after what was acknowledged, each record once", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    Options o{dir.path(), 4096};
    o.ack_persist_ms = 3'600'000;  // never due within the test: only the reopen writes it
    REQUIRE(s.open(o));
    for (int i = 0; i < 60; ++i) s.append(alt(i, 100));
    REQUIRE(s.sync());
    REQUIRE(count_segments(dir.path()) > 1);
    std::vector<Record> got;
    Position p;
    REQUIRE(s.read(got, 2, 1 << 20, p) == 2);
    REQUIRE(s.ack(p));
    REQUIRE(acked_file(dir.path()) != pos_text(p));

    REQUIRE(s.open(o));
    CHECK(acked_file(dir.path()) == pos_text(p));
    Position end;
    const auto rest = read_all(s, end);
    REQUIRE(rest.size() == 58);
    CHECK(rest.front() == alt(2, 100));
    CHECK(rest.back() == alt(59, 100));
}

TEST_CASE("a spool closed whole opens again with nothing to recover and nothing said", "[spool]") {
    jobtrail::test::TempDir dir;
    {
        Spool s;
        REQUIRE(s.open({dir.path(), 4096}));
        for (int i = 0; i < 3; ++i) s.append(rec(i));
        REQUIRE(s.sync());
    }
    Spool s;
    Spool::Recovery rv;
    REQUIRE(s.open({dir.path(), 4096}, &rv));
    CHECK(rv.note.empty());
    CHECK(rv.truncated_bytes == 0);
    CHECK(rv.segments_removed == 0);
    Position end;
    CHECK(read_all(s, end).size() == 3);
}

TEST_CASE("a spool cut back to exactly the acknowledged point keeps nothing after it, synced or not", "[spool]") {
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 4096}));
    for (int i = 0; i < 6; ++i) s.append(alt(i));
    REQUIRE(s.sync());
    std::vector<Record> got;
    Position p;
    REQUIRE(s.read(got, 2, 1 << 20, p) == 2);
    REQUIRE(s.ack(p));
    // Appended but not yet synced: cut too.
    s.append(alt(50));
    s.append(alt(51));
    REQUIRE(s.discard_after(p));
    CHECK(s.pending_bytes() == 0);
    s.append(alt(100));
    REQUIRE(s.sync());
    s.rewind();
    Position end;
    got = read_all(s, end);
    REQUIRE(got.size() == 1);
    CHECK(got[0] == alt(100));
}

TEST_CASE("a spool opened again keeps only what was synced: what was appended after is read again by its source",
          "[spool]") {
    // Opened again (after a failed write-back, or a restart): records appended but not synced
    // were never durable, so their sources did not move their checkpoints past them and read
    // them again. Written now as well, each would be sent twice.
    jobtrail::test::TempDir dir;
    Spool s;
    REQUIRE(s.open({dir.path(), 1 << 20}));
    for (int i = 0; i < 3; ++i) s.append(alt(i));
    REQUIRE(s.sync());
    s.append(alt(3));  // its own frame, waiting in the buffer
    s.append(rec(4));  // a run of one stream, being built
    s.append(rec(5));
    REQUIRE(s.open({dir.path(), 1 << 20}));
    s.append(alt(10));
    REQUIRE(s.sync());
    Position end;
    const auto got = read_all(s, end);
    CHECK(got == std::vector<Record>{alt(0), alt(1), alt(2), alt(10)});
}
