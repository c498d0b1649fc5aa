#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

// The container runtime's log format (CRI; kubelet's /var/log/pods, the file source's `format:
// cri`): one line per write,
//   <RFC3339Nano time> <stdout|stderr> <P|F>[:<tag>...] <message>
// where a P(artial) line continues in the next line of the same stream, up to its F(ull) line.
namespace jobtrail::shipper::cri {

struct Line {
    int64_t ts_ns = 0;
    std::string_view stream;  // stdout or stderr
    bool partial = false;
    std::string_view message;
};

// nullopt: not a CRI line (the caller ships it as it is, and counts it).
std::optional<Line> parse(std::string_view text);

// Joins a file's P pieces to their F line, per stream (the runtime interleaves stdout and
// stderr), holding at most `max_bytes` per stream: a piece that would pass it first hands out
// what is held as a line of its own (cut), so a line without end costs bounded memory and none
// of it is lost. Each piece comes with the file offset where its line starts, so that a
// checkpoint never passes a piece that is only held here (resume_offset).
class Joiner {
public:
    explicit Joiner(size_t max_bytes) : max_(max_bytes) {}
    struct Joined {
        std::string text;
        int64_t ts_ns = 0;  // the last piece's: when the line was complete
        std::string stream;
        bool cut = false;  // handed out before its F line
    };
    // One parsed line starting at `offset`; appends the lines it completes (0, 1 or 2).
    void feed(const Line& l, uint64_t offset, std::vector<Joined>& out);
    // Everything held, as cut lines (the end of a rotated file, a bound on held bytes).
    void take_all(std::vector<Joined>& out);
    size_t held_bytes() const { return slots_[0].text.size() + slots_[1].text.size(); }
    bool holding() const { return slots_[0].holding || slots_[1].holding; }
    // Where reading must start again to see every held piece: the earliest held line's offset,
    // or `done` (the end of the last line handed out) when nothing is held.
    uint64_t resume_offset(uint64_t done) const;
    void clear();

    // After a restart from resume_offset(): lines before `done` were handed out already, but
    // for the streams held then (from their start offset, -1: none). replayed() says a line at
    // `offset` is one of those (`l` null: not a CRI line) and is to be skipped.
    std::array<int64_t, 2> held_starts() const;
    void replay(uint64_t done, std::array<int64_t, 2> starts);
    bool replayed(const Line* l, uint64_t offset);

private:
    struct Slot {
        bool holding = false;
        std::string text;
        int64_t ts_ns = 0;
        uint64_t start = 0;
    };
    static void hand_out(Slot& s, std::string_view stream, bool cut, std::vector<Joined>& out);
    size_t max_;
    std::array<Slot, 2> slots_;  // stdout, stderr
    uint64_t replay_done_ = 0;
    std::array<int64_t, 2> replay_starts_{-1, -1};
};

}  // namespace jobtrail::shipper::cri
