#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "config/shipper_config.hpp"
#include "loki/client.hpp"
#include "loki/push.hpp"
#include "loki/response.hpp"
#include "shipper/event.hpp"
#include "shipper/internal_events.hpp"
#include "shipper/lane_metrics.hpp"
#include "shipper/lanes.hpp"
#include "shipper/metrics.hpp"
#include "shipper/sender/metrics.hpp"
#include "shipper/sender/policy.hpp"
#include "spool/spool.hpp"

namespace jobtrail::shipper {

// Drains the spool to Loki so that Loki cannot drop a line without us knowing.
//
// One stream per push request: Loki 3 answers a push with the ingester's result for the last
// stream only (an earlier stream over its rate limit is silently not stored, reply 204), so a
// request carries exactly one stream and its answer is about every entry in it. Throughput
// comes from up to `batch.max_in_flight` requests in flight at once, each for a different
// stream, each worker with its own connection.
//
// One Sender drains one spool lane (lanes.hpp): the node's own records and the jobs' NCCL
// output each have their own, so a job's stream held back by Loki never delays the kernel's.
// A lane's spool is one FIFO. Batches read from it form a window; each batch's records are split by
// stream into pieces queued per stream, sent in the spool's order within a stream (one request
// in flight per stream). After each answer the spool is acknowledged up to the frame of the
// first record not yet answered for (every earlier batch wholly answered, and the front one up
// to there), so after a kill -9 reading resumes at a point before which everything is in Loki;
// what follows is re-sent byte-identical and Loki drops the duplicates. A stream in backoff holds only its own pieces:
// other streams keep going through later batches of the window meanwhile (at most kWindowBatches batches; while no
// stream waits, kWindowBytes of spool frames beyond the front batch, which is most of the shipper's memory).
//
// What each of Loki's answers does to a stream (its pace, retries, request cap, what is counted
// and logged) is the ResponsePolicy's (sender/policy.hpp); the Sender applies its decisions.
// The window and acknowledgements are in sender/window.cpp, request building in
// sender/request.cpp, the workers in sender.cpp.
class Sender {
public:
    using TransportFactory = std::function<std::unique_ptr<loki::PushTransport>()>;
    static constexpr size_t kWindowBatches = 16;
    // Read ahead of what is in flight: 16 batches of a megabyte were most of the shipper's peak
    // memory; 512 KiB beyond the front batch keeps pushes going back to back (measured with
    // bench/shipper.sh: no fewer lines/s than 1 MiB, 2 MiB less peak RSS).
    static constexpr uint64_t kWindowBytes = 512 << 10;
    // A stream's learned rate is kept this long after its last record, then forgotten.
    static constexpr int64_t kForgetIdleNs = 600'000'000'000;

    Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events, Lane lane = Lane::kNode);
    // For tests: each worker gets its own transport from `make`.
    Sender(const config::ShipperConfig& cfg, spool::Spool& spool, Metrics& m, Events events, TransportFactory make,
           Lane lane = Lane::kNode);
    // Streams with state kept (pending pieces or a learned rate); for tests.
    size_t tracked_streams() const { return streams_.size(); }
    // For tests: probe learned limits again after `ns` instead of ResponsePolicy::kReprobeNs.
    void set_reprobe_after(int64_t ns) { policy_.set_reprobe_after(ns); }
    ~Sender();

    // Loops until stop; with nothing to read it waits for the spool's next commit (batch_wait at most).
    void run(const std::atomic<bool>& stop);
    // True while read records wait for Loki's answer.
    bool busy() const { return busy_; }

private:
    struct Batch {
        spool::ReadBatch records;  // views into its read buffer; batches are recycled, buffers kept
        spool::Position end;
        size_t open_pieces = 0;  // pieces not yet answered for
    };
    // A stream's records of one batch, in the spool's order: single records and compressed runs
    // (a run's RecordView stands for all of it).
    struct Piece {
        Batch* batch;
        std::vector<const spool::RecordView*> recs;
        size_t next = 0;  // records (runs) before it are answered for
    };
    struct StreamState {
        std::deque<Piece> queue;
        bool in_flight = false;
        ResponsePolicy::Stream policy;  // its pace, its retries, what Loki's answers taught of it
        // The request in flight: entries, what rate limits count of them, their lines' bytes
        // (sent), and how many of the piece's recs it holds; or (partial) entries of the run at the
        // piece's `next` from run_done on.
        ResponsePolicy::Sent sent;
        size_t sent_items = 0;
        bool partial = false;
        uint32_t sent_consumed = 0;  // partial: entries the request covers, skipped too-old ones included
        uint64_t sent_skipped = 0;
        uint32_t run_done = 0;  // entries of the run at the front piece's `next` answered for
        int64_t last_active_ns = 0;
    };
    struct Job {
        std::string stream;
        loki::Buffer body;  // the request is its first body_size bytes (a recycled buffer)
        size_t body_size = 0;
        loki::HttpResult result;
    };

    // sender.cpp: the workers, and the run loop that feeds them and applies the policy.
    void start_workers();
    void stop_workers();
    void worker();
    void dispatch(int64_t now);
    void handle(const Job& job);
    // sender/window.cpp: batches read, pieces queued per stream, the spool acknowledged.
    bool fill_window();
    void advance(StreamState& s, size_t items);
    void settle(StreamState& s);
    void ack_done();
    void forget_idle(int64_t now);
    // sender/request.cpp: the stream's next request into job.body, at most cap bytes (one entry
    // at least); false if nothing is left to send (what was skipped is counted).
    bool build(const std::string& name, StreamState& s, uint64_t cap, Job& job);
    // The front run's entries from run_done on, decompressed: for a run that cannot go as it is
    // (over cap, too old in part, metadata Loki is not sent).
    bool build_partial(const std::string& name, StreamState& s, uint64_t cap, int64_t oldest, Job& job);

    const config::ShipperConfig& cfg_;
    spool::Spool& spool_;
    SenderMetrics& m_;
    Drops& drops_;
    LaneMetrics& lanes_m_;
    Events events_;
    TransportFactory make_;
    Lane lane_;
    size_t max_in_flight_;
    std::atomic<bool> busy_{false};
    ResponsePolicy policy_;

    std::list<Batch> window_;                 // stable addresses: pieces point into it
    uint64_t window_bytes_ = 0;               // of its batches' spool frames
    std::list<Batch> spare_;                  // acknowledged batches, their buffers reused by the next reads
    std::vector<loki::Buffer> spare_bodies_;  // request buffers of answered pushes
    loki::PushScratch push_scratch_;
    std::vector<loki::StreamRef> push_streams_;
    std::vector<std::string_view> push_runs_;
    // One run decompressed for build_partial (reused; a huge one's is let go).
    std::string run_raw_;
    std::vector<spool::RecordView> run_records_;
    std::vector<spool::MetadataView> run_metadata_;
    std::map<std::string, StreamState, std::less<>> streams_;
    size_t in_flight_ = 0;
    spool::Position acked_;  // what the spool was last told was answered for

    std::mutex mu_;
    std::condition_variable work_cv_, done_cv_;
    std::deque<Job> todo_, done_;
    bool quit_ = false;
    std::vector<std::thread> workers_;
};

}  // namespace jobtrail::shipper
