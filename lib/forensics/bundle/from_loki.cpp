// A bundle's records from Loki: one query pool over the job's prolog/epilog records and, per
// node, its NCCL, kernel, slurmd, fabric manager and DCGM lines.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <thread>

#include "common/text.hpp"
#include "common/time.hpp"
#include "forensics/bundle/collection.hpp"
#include "forensics/bundle/find_job.hpp"
#include "forensics/bundle/nccl_steps.hpp"
#include "forensics/logql.hpp"
#include "joblog/shipped.hpp"
#include "node/nccl_file.hpp"
#include "node/schema.hpp"

namespace jobtrail::forensics::bundle {
namespace {

std::string label(const loki::QueryEntry& e, const char* k) {
    auto it = e.labels->find(k);
    return it == e.labels->end() ? std::string() : it->second;
}

// Every query is for one cluster, and Loki's answer is data: a stream of another cluster that
// comes back anyway (a proxy, a bug, a forged label) is left out and makes the query fail.
QueryRecord run_query(const BundleOptions& o, const std::string& cluster, const std::string& name,
                      const std::string& logql, int64_t start, int64_t end,
                      const std::function<void(const loki::QueryEntry&)>& sink) {
    QueryRecord r{name, logql};
    const int64_t t0 = monotonic_ns();
    loki::Client client(o.endpoint);
    client.load_secrets();  // unreadable: said once, when the job is looked up
    uint64_t foreign = 0;
    // query_range splits by Loki's max_query_length.
    const auto res = loki::query_range(client, logql, start, end, o.query, [&](const loki::QueryEntry& e) {
        if (!cluster.empty() && label(e, node::label::kCluster) != cluster) {
            ++foreign;
            return;
        }
        sink(e);
    });
    r.lines = res.entries - foreign;
    r.truncated = res.truncated;
    r.failed = res.failed || foreign;
    r.error = res.error;
    if (foreign && r.error.empty())
        r.error = "Loki answered " + std::to_string(foreign) + " line(s) of other clusters than " +
                  escape_line(cluster) + ": left out";
    r.seconds = static_cast<double>(monotonic_ns() - t0) / 1e9;
    return r;
}

struct Query {
    std::string logql;
    std::function<void(const loki::QueryEntry&)> sink;
    int64_t lookback_ns = 0;  // before the window's start
};

struct Task {
    std::string name, logql;
    std::function<void(const loki::QueryEntry&)> sink;
    // Run first when set, then after_before; should it fail, the task's record says so
    // (its lines are all there, some under a name without their step).
    Query before = {};
    std::function<void()> after_before = {};
};

std::vector<Task> tasks_of(Collection& col, const Window& w, const Scope& scope) {
    const BundleOptions& o = col.options();
    std::vector<Task> tasks;
    // Of the nodes asked for only: the summary's header names no other node's epilog.
    tasks.push_back(
        {"prolog and epilog", prolog_epilog_query(scope, o.job_id, o.nodes), [&col](const loki::QueryEntry& e) {
             const std::string node = path_component(label(e, node::label::kNode));
             std::string phase = label(e, node::metadata::kPhase);
             // Without the label (structured metadata off), the line's own.
             if (phase.empty()) phase = joblog::parse_shipped_line(e.line).phase;
             if (phase.empty()) phase = "prolog";
             // Anyone who can push to Loki can set it: only the two phases name
             // files as such; anything else is kept, apart and escaped.
             if (phase != "prolog" && phase != "epilog") phase = "phase-" + path_component(phase);
             col.record(node, phase, "nodes/" + node + "/" + phase + ".log",
                        col.kernel_time(node, phase, e.line, e.ts_ns), e.line);
         }});
    for (const auto& n : w.nodes) {
        const std::string node = path_component(n);
        // One NCCL query per node: bounded queries that run in parallel. Before it, the
        // lines that say a process's step (a few per file), for the lines that do not.
        auto steps = std::make_shared<NcclSteps>();
        Task t{"NCCL " + escape_line(n), nccl_query(scope, o.job_id, n),
               [&col, node, steps](const loki::QueryEntry& e) {
                   // Its name, or its step and what the line says (the shipper sends the
                   // name only when the line does not).
                   std::string file = label(e, node::metadata::kFile);
                   if (const auto origin = node::nccl_line_origin(e.line); origin && file.empty()) {
                       std::string step = label(e, node::metadata::kStep);  // every line's, from older shippers
                       if (!NcclSteps::usable(step)) step = steps->step_of(origin->host, origin->pid, e.ts_ns);
                       file = node::nccl_file_name(step, origin->host, origin->pid);
                   }
                   if (file.empty()) file = "nccl.log";
                   col.record(node, "nccl", "nccl/" + node + "/" + path_component(file), e.ts_ns, e.line);
               }};
        // From ten minutes before the window: a file says its step again after ten minutes.
        t.before = {nccl_step_query(scope, o.job_id, n),
                    [steps](const loki::QueryEntry& e) {
                        steps->add(e, label(e, node::metadata::kStep), label(e, node::metadata::kFile));
                    },
                    NcclSteps::kSaidEveryNs};
        t.after_before = [steps] { steps->done(); };
        tasks.push_back(std::move(t));
        tasks.push_back({"kernel " + escape_line(n), kernel_query(scope, n), [&col, node](const loki::QueryEntry& e) {
                             col.record(node, "kmsg", "nodes/" + node + "/kmsg.log", e.ts_ns, e.line);
                         }});
        tasks.push_back(
            {"slurmd " + escape_line(n), slurmd_query(scope, n, o.job_id), [&col, node](const loki::QueryEntry& e) {
                 col.record(node, "slurmd", "nodes/" + node + "/slurmd.log", e.ts_ns, e.line);
             }});
        tasks.push_back({"fabric manager " + escape_line(n), fabric_manager_query(scope, n),
                         [&col, node](const loki::QueryEntry& e) {
                             col.record(node, "fabric-manager", "nodes/" + node + "/fabric-manager.log", e.ts_ns,
                                        e.line);
                         }});
        tasks.push_back({"DCGM " + escape_line(n), dcgm_query(scope, n), [&col, node](const loki::QueryEntry& e) {
                             col.record_dcgm(node, "nodes/" + node + "/dcgm.log", e.ts_ns, e.line, e.labels);
                         }});
    }
    return tasks;
}

// Queries in flight: o.parallel, fewer when each is long. Loki splits a query into one piece
// per split_queries_by_interval and runs max_query_parallelism pieces of a tenant at a time:
// more queries in flight than fill those slots only queue in Loki, and delay other users.
int in_flight(const BundleOptions& o, const Window& w) {
    const int64_t interval = std::max<int64_t>(o.split_interval_ns, 60'000'000'000);
    const int64_t pieces = std::max<int64_t>(1, (w.end_ns - w.start_ns + interval - 1) / interval);
    return static_cast<int>(std::clamp<int64_t>(o.max_query_parallelism / pieces, 1, std::max(1, o.parallel)));
}

// The tasks, in_flight() at a time.
std::vector<QueryRecord> run_tasks(const BundleOptions& o, const std::string& cluster, std::vector<Task>& tasks,
                                   const Window& w) {
    std::vector<QueryRecord> done(tasks.size());
    std::atomic<size_t> next{0}, finished{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < in_flight(o, w); ++t) {
        pool.emplace_back([&] {
            for (size_t i; (i = next++) < tasks.size();) {
                // An exception here would end the process (std::terminate) and leave the
                // staging directory: the query fails instead, and the bundle is partial.
                try {
                    Task& task = tasks[i];
                    QueryRecord pre;
                    if (task.before.sink) {
                        try {
                            pre = run_query(o, cluster, task.name, task.before.logql,
                                            w.start_ns - task.before.lookback_ns, w.end_ns, task.before.sink);
                        } catch (const std::exception& ex) {
                            // The task's own query still runs: its lines, some named less well.
                            pre.failed = true;
                            pre.error = escape_line(ex.what());
                        }
                        if (task.after_before) task.after_before();
                    }
                    done[i] = run_query(o, cluster, task.name, task.logql, w.start_ns, w.end_ns, task.sink);
                    if (pre.failed || pre.truncated) {
                        done[i].failed = done[i].failed || pre.failed;
                        done[i].truncated = done[i].truncated || pre.truncated;
                        if (done[i].error.empty()) done[i].error = "steps (" + task.before.logql + "): " + pre.error;
                    }
                    done[i].seconds += pre.seconds;
                } catch (const std::exception& ex) {
                    done[i] = QueryRecord{tasks[i].name, tasks[i].logql};
                    done[i].failed = true;
                    done[i].error = escape_line(ex.what());
                }
                tasks[i] = Task{};  // what its callbacks held (a node's steps) goes now
                const size_t k = ++finished;
                if (o.progress)
                    std::fprintf(stderr, "jobtrail: [%zu/%zu] %s: %llu lines%s\n", k, tasks.size(),
                                 done[i].name.c_str(), static_cast<unsigned long long>(done[i].lines),
                                 done[i].failed ? (" FAILED: " + done[i].error).c_str() : "");
            }
        });
    }
    for (auto& t : pool) t.join();
    return done;
}

}  // namespace

Gathered gather_from_loki(const BundleOptions& o, Collection& col, Analyzer& an) {
    Gathered g;
    g.source = loki::Client(o.endpoint).describe();
    FoundJob job = find_job(o);
    if (job.query) g.queries.push_back(*job.query);
    g.missing_nodes = std::move(job.missing_nodes);
    g.nodelist_notes = std::move(job.nodelist_notes);
    g.cluster = job.cluster;
    if (job.exit_code != kExitOk) {
        g.exit_code = job.exit_code;
        g.error = std::move(job.error);
        return g;
    }
    Window& w = g.window = std::move(job.window);
    if (!w.end_ns) w.end_ns = realtime_ns();
    // Before the records come: they are grouped by it. Not from local files (their window
    // is what they hold, the prolog's kernel context included). The job's own start and end,
    // not the window's: an Xid before the job in a window given wider is said to be before it.
    an.facts().job_start_ns = job.job_start_ns ? job.job_start_ns : w.start_ns;
    an.facts().job_end_ns = job.job_end_ns ? job.job_end_ns : (o.end_ns ? w.end_ns : 0);
    w.start_ns -= o.margin_ns;
    w.end_ns += o.margin_ns;
    const Scope scope{o.schema, job.cluster};
    auto tasks = tasks_of(col, w, scope);
    auto got = run_tasks(o, job.cluster, tasks, w);
    g.queries.insert(g.queries.end(), got.begin(), got.end());
    return g;
}

}  // namespace jobtrail::forensics::bundle
