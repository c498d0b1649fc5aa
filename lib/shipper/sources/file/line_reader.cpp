#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "common/text.hpp"
#include "shipper/sources/file/file_source.hpp"
#include "shipper/sources/file/fingerprint.hpp"

namespace jobtrail::shipper {
namespace {

// A cleared line buffer keeps its capacity: give back a big one, or three hundred files that
// once held a long line would still cost their peak.
void release(std::string& s) {
    if (s.capacity() > 4096)
        std::string().swap(s);
    else
        s.clear();
}

}  // namespace

void FileSource::read_file(Tracked& t, std::vector<Event>& out, size_t& budget) {
    if (t.fd.valid()) {
        struct stat st {};
        if (::fstat(t.fd.get(), &st) != 0) return;
        t.size = static_cast<uint64_t>(st.st_size);
        if (t.size < t.read_off) {
            // copytruncate: the file started over. Its last line without end was read: ship it.
            if (!t.partial.empty()) take_partial(t, out);
            drain_cri(t, out);
            t.cri.clear();
            t.read_off = t.emitted_off = 0;
            t.fingerprint.clear();
        }
        if (t.fingerprint.empty() || (!fingerprint_full(t.fingerprint) && t.size > 0))
            t.fingerprint = fingerprint(t.fd.get(), t.size);
        // What a line costs in the spool beyond its bytes: the stream and the file's metadata are
        // in every record. Charged per line, so a user's one-byte lines under a long file name
        // cannot turn a pass's budget into a hundred times as many spool bytes.
        size_t overhead = 32;
        if (t.origin) {
            overhead += t.origin->stream.size();
            for (const auto& [k, v] : t.origin->metadata) overhead += k.size() + v.size();
        }
        char buf[65536];
        bool spent = false;
        while (budget > 0 && !spent && t.read_off < t.size) {
            const ssize_t n =
                ::pread(t.fd.get(), buf, std::min<size_t>(sizeof buf, budget), static_cast<off_t>(t.read_off));
            if (n <= 0) break;
            t.read_off += static_cast<uint64_t>(n);
            t.last_growth_ns = realtime_ns();
            std::string_view data(buf, static_cast<size_t>(n));
            while (!data.empty()) {
                const size_t nl = data.find('\n');
                if (nl == std::string_view::npos) {
                    t.partial.append(data);
                    budget -= std::min(budget, data.size());
                    // A line without end that keeps growing: cut it at the cap rather than hold it forever.
                    if (t.partial.size() > max_line_ + 4096) take_partial(t, out);
                    break;
                }
                if (t.partial.empty()) {
                    emit_line(t, data.substr(0, nl), out);
                    t.emitted_off += nl + 1;
                } else {
                    t.partial.append(data.substr(0, nl));
                    take_partial(t, out);
                    t.emitted_off += 1;
                }
                data.remove_prefix(nl + 1);
                budget -= std::min(budget, nl + 1 + overhead);
                if (budget == 0 && !data.empty()) {
                    // The rest of the chunk is read again next pass, from the end of this line.
                    t.read_off = t.emitted_off;
                    spent = true;
                    break;
                }
            }
        }
    }
    // A last line without newline, at the end of the file and idle for a while: take it as it
    // is. A closed file is at its end unless it changed since.
    if (!t.partial.empty() && t.read_off >= t.size && !t.stale && realtime_ns() - t.last_growth_ns > idle_ns_)
        take_partial(t, out);
}

void FileSource::take_partial(Tracked& t, std::vector<Event>& out) {
    emit_line(t, t.partial, out);
    t.emitted_off += t.partial.size();
    release(t.partial);
}

void FileSource::cut_partials(std::vector<Event>& out, uint64_t held) {
    // Longest first: fewest lines cut for the bytes given back. Each is shipped in pieces no
    // longer than a line may be, so none of it is lost; the rest of the line, when it comes,
    // is a line of its own.
    std::vector<Tracked*> v;
    for (auto& [k, t] : files_)
        if (!t.partial.empty() || t.cri.holding()) v.push_back(&t);
    auto held_by = [](const Tracked* t) { return t->partial.size() + t->cri.held_bytes(); };
    std::sort(v.begin(), v.end(), [&](const Tracked* a, const Tracked* b) { return held_by(a) > held_by(b); });
    auto pieces = [&](Tracked& t, std::string_view rest) {
        while (!rest.empty()) {
            std::string_view piece = utf8_prefix(rest, max_line_);
            if (piece.empty()) piece = rest.substr(0, max_line_);
            emit_line(t, piece, out);
            rest.remove_prefix(piece.size());
        }
    };
    for (Tracked* t : v) {
        if (held <= cfg_.max_partial_bytes) break;
        const size_t n = held_by(t);
        if (!t->partial.empty()) {
            pieces(*t, t->partial);
            t->emitted_off += t->partial.size();
            release(t->partial);
        }
        // CRI pieces waiting for their F: shipped as they are (each at most a line long).
        drain_cri(*t, out);
        held -= std::min<uint64_t>(held, n);
        ++cut_unsaid_;
        cut_bytes_unsaid_ += n;
        ++m_.partial_lines_cut;
    }
}

void FileSource::flush_partial(std::vector<Event>& out) {
    for (auto& [k, t] : files_) {
        struct stat st {};
        // Only a real last line: at the end of the file, not the cut of a bounded read.
        if (t.partial.empty() && !t.cri.holding()) continue;
        if (t.fd.valid() ? ::fstat(t.fd.get(), &st) != 0 || t.read_off < static_cast<uint64_t>(st.st_size) : t.stale)
            continue;
        if (!t.partial.empty()) take_partial(t, out);
        // CRI pieces whose F line is not written yet: shipped as they are, like a last line
        // without newline (its rest, when it comes, is a line of its own).
        drain_cri(t, out);
    }
}

}  // namespace jobtrail::shipper
