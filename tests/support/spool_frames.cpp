#include "spool_frames.hpp"

#include <dirent.h>

#include "common/varint.hpp"

namespace jobtrail::spool {
namespace {

// Appends the bytes f writes, at most `bound` of them.
template <typename F>
void append_with(std::string& out, size_t bound, F&& f) {
    const size_t at = out.size();
    out.resize(at + bound);
    out.resize(static_cast<size_t>(f(out.data() + at) - out.data()));
}

size_t bytes_bound(std::string_view s) {
    return 10 + s.size();
}

// line | n | n x (key | value): a record after its timestamp (and, in payload 1, its stream).
void append_line_and_metadata(std::string& out, const Record& r) {
    size_t bound = bytes_bound(r.line) + 10;
    for (const auto& [k, v] : r.metadata) bound += bytes_bound(k) + bytes_bound(v);
    append_with(out, bound, [&](char* p) {
        p = put_bytes(p, r.line);
        p = put_varint(p, r.metadata.size());
        for (const auto& [k, v] : r.metadata) {
            p = put_bytes(p, k);
            p = put_bytes(p, v);
        }
        return p;
    });
}

// The frame's header, then its version; the header is filled by end_frame().
size_t begin_frame(std::string& out, char version) {
    const size_t start = out.size();
    out.append(kFrameHeader, '\0');
    out.push_back(version);
    return start;
}

void end_frame(std::string& out, size_t start) {
    put_frame_header(out.data() + start, out.size() - start - kFrameHeader);
}

}  // namespace

void append_frame(std::string& out, const Record& r) {
    const size_t start = begin_frame(out, '\x01');
    append_with(out, 10 + bytes_bound(r.stream), [&](char* p) {
        p = put_varint(p, static_cast<uint64_t>(r.ts_ns));
        return put_bytes(p, r.stream);
    });
    append_line_and_metadata(out, r);
    end_frame(out, start);
}

void append_run(std::string& out, const std::vector<Record>& records) {
    const size_t start = begin_frame(out, '\x02');
    append_with(out, bytes_bound(records.front().stream),
                [&](char* p) { return put_bytes(p, records.front().stream); });
    for (const auto& r : records) {
        append_with(out, 10, [&](char* p) { return put_varint(p, static_cast<uint64_t>(r.ts_ns)); });
        append_line_and_metadata(out, r);
    }
    end_frame(out, start);
}

void append_compressed_run(std::string& out, const std::vector<Record>& records) {
    RunBuilder b;
    b.begin(records.front().stream);
    for (const auto& r : records) {
        const RecordRef ref{r.ts_ns, r.stream, r.line, &r.metadata, nullptr};
        b.add(ref, RunBuilder::entry_size(ref));
    }
    b.finish(out);
}

int count_segments(const std::string& dir) {
    int n = 0;
    if (DIR* d = ::opendir(dir.c_str())) {
        while (dirent* e = ::readdir(d)) n += std::string(e->d_name).rfind("seg-", 0) == 0;
        ::closedir(d);
    }
    return n;
}

}  // namespace jobtrail::spool
