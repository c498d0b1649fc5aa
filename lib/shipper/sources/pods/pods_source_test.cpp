#include "shipper/sources/pods/pods_source.hpp"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "temp_dir.hpp"

using namespace jobtrail::shipper;
namespace fs = std::filesystem;

namespace {

constexpr const char* kUid = "0f3c1a2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b";

struct Tree {
    jobtrail::test::TempDir dir;
    Metrics m;
    PodsConfig cfg;
    nlohmann::json saved;
    Tree() {
        cfg.enabled = true;
        cfg.root = dir.path() + "/pods";
        cfg.nccl_containers = {"trainer"};
    }
    std::string container(const std::string& pod_dir, const std::string& c) {
        const std::string d = cfg.root + "/" + pod_dir + "/" + c;
        fs::create_directories(d);
        return d;
    }
    std::unique_ptr<FileSource> source() {
        auto s = std::make_unique<FileSource>(pod_files(cfg),
                                              FileSourceOptions{.node = {"c1", "gpu01"},
                                                                .max_line = 1024,
                                                                .idle_ms = 100000,
                                                                .scan_interval_ms = 0,
                                                                .labeler = pod_labeler(cfg)},
                                              m);
        s->restore(saved);
        return s;
    }
    std::vector<Event> poll(FileSource& s) {
        std::vector<Event> ev;
        while (s.poll(ev, 1 << 20)) {
        }
        saved = s.checkpoint();
        return ev;
    }
    static std::vector<std::string> lines(const std::vector<Event>& ev) {
        std::vector<std::string> out;
        for (const auto& e : ev) out.push_back(e.line);
        return out;
    }
};

void append(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::app) << text;
}

std::string md(const Event& e, const std::string& key) {
    for (const auto* m : {&e.origin->metadata, &e.metadata})
        for (const auto& [k, v] : *m)
            if (k == key) return v;
    return "";
}

}  // namespace

TEST_CASE("pod streams: namespace, pod, container and node from the path, the uid as metadata", "[pods]") {
    Tree t;
    t.cfg.job_id_namespaces = {"train"};
    const std::string trainer = t.container(std::string("train_slurm-job-4242-worker-0_") + kUid, "trainer");
    const std::string web = t.container("serving_web-7d9f_1111-2222", "app");
    const std::string odd = t.container("Bad_Pod_1", "app");  // no upper case in Kubernetes names
    append(trainer + "/0.log", "2026-11-29T21:52:22.000000001Z stdout F NCCL INFO Channel 00 : 0 1\n");
    append(web + "/0.log", "2026-11-29T21:52:23Z stderr F listening\n");
    append(odd + "/0.log", "2026-11-29T21:52:24Z stdout F never read\n");
    auto s = t.source();
    const auto ev = t.poll(*s);
    REQUIRE(ev.size() == 2);
    const Event& tr = ev[0].origin->label("pod") == "web-7d9f" ? ev[1] : ev[0];
    const Event& w = &tr == &ev[0] ? ev[1] : ev[0];
    CHECK(tr.labels() == jobtrail::loki::LabelSet{{"cluster", "c1"},
                                                  {"node", "gpu01"},
                                                  {"job", "kubernetes-pods"},
                                                  {"service_name", "kubernetes-pods"},
                                                  {"namespace", "train"},
                                                  {"pod", "slurm-job-4242-worker-0"},
                                                  {"container", "trainer"},
                                                  {"job_id", "4242"}});
    CHECK(md(tr, "pod_uid") == kUid);
    CHECK(md(tr, "stream") == "stdout");
    CHECK(tr.ts_ns == 1795989142000000001);
    // A container configured as running NCCL goes through the stages' NCCL rules, with its job.
    CHECK(tr.origin->kind == jobtrail::node::StreamKind::kNccl);
    CHECK(tr.origin->job_id == "4242");
    CHECK_FALSE(tr.origin->slurm_job);  // a name a pod was given: never a Slurm user's NCCL budget
    CHECK(w.line == "listening");
    CHECK(w.origin->kind == jobtrail::node::StreamKind::kPod);
    CHECK(w.origin->label("job_id").empty());  // no Slurm job in its name
    CHECK(w.origin->label("namespace") == "serving");
    CHECK(t.m.group<FileSourceMetrics>().files_refused.value({"unexpected_name"}) ==
          1);  // the odd directory, said and counted once
    t.poll(*s);
    CHECK(t.m.group<FileSourceMetrics>().files_refused.value({"unexpected_name"}) == 1);
}

TEST_CASE("pod job ids: only a valid Slurm job id the pattern captures becomes job_id", "[pods]") {
    Tree t;
    t.cfg.job_id_namespaces = {"a"};
    t.cfg.job_id_pattern = "sj([0-9a-z]+)-x";
    append(t.container("a_sj77-x_1", "c") + "/0.log", "2026-11-29T21:52:22Z stdout F one\n");
    append(t.container("a_sjabc-x_2", "c") + "/0.log", "2026-11-29T21:52:22Z stdout F two\n");  // not an id
    auto s = t.source();
    std::map<std::string, std::string> ids;
    for (const auto& e : t.poll(*s)) ids[e.line] = std::string(e.origin->label("job_id"));
    CHECK(ids == std::map<std::string, std::string>{{"one", "77"}, {"two", ""}});
}

TEST_CASE("pod rotation as kubelet does it: the renamed file to its end once, its .gz never", "[pods]") {
    Tree t;
    const std::string c = t.container("ns_pod_1", "c");
    auto cri = [](int i) {
        return "2026-11-29T21:52:" + std::to_string(10 + i) + "Z stdout F line " + std::to_string(i) + "\n";
    };
    append(c + "/0.log", cri(0));
    auto s = t.source();
    CHECK(Tree::lines(t.poll(*s)) == std::vector<std::string>{"line 0"});
    append(c + "/0.log", cri(1));
    fs::rename(c + "/0.log", c + "/0.log.20261129-215211");  // kubelet renames, the runtime reopens
    append(c + "/0.log", cri(2));
    CHECK(Tree::lines(t.poll(*s)) == std::vector<std::string>{"line 1", "line 2"});  // old file first
    // The next rotation compresses the previous one: a new inode with the same lines, never read.
    append(c + "/0.log.20261129-215211.gz", cri(1));
    fs::remove(c + "/0.log.20261129-215211");
    append(c + "/0.log", cri(3));
    CHECK(Tree::lines(t.poll(*s)) == std::vector<std::string>{"line 3"});
    s.reset();
    auto again = t.source();  // a restart reads nothing twice
    CHECK(t.poll(*again).empty());
}

TEST_CASE("pod P pieces held at a checkpoint are read again after a restart, and nothing twice", "[pods]") {
    Tree t;
    const std::string c = t.container("ns_pod_1", "c");
    append(c + "/0.log",
           "2026-11-29T21:52:22Z stdout P begin \n"
           "2026-11-29T21:52:22.5Z stderr F warning between\n"
           "not cri\n");
    auto s = t.source();
    CHECK(Tree::lines(t.poll(*s)) == std::vector<std::string>{"warning between", "not cri"});
    CHECK(t.m.group<FileSourceMetrics>().cri_malformed == 1);
    s.reset();  // killed here: the checkpoint's offset is the held piece's
    append(c + "/0.log", "2026-11-29T21:52:23Z stdout F end\n");
    auto again = t.source();
    CHECK(Tree::lines(t.poll(*again)) == std::vector<std::string>{"begin end"});
    CHECK(t.m.group<FileSourceMetrics>().cri_malformed == 1);
    s.reset();
    auto third = t.source();
    CHECK(t.poll(*third).empty());
}

TEST_CASE("pod job ids: a pod takes a Slurm job's id only in a namespace the site named, by its whole name", "[pods]") {
    Tree t;
    const auto ids = [&] {
        std::map<std::string, std::string> out;
        auto s = t.source();
        for (const auto& e : t.poll(*s)) out[e.line] = std::string(e.origin->label("job_id"));
        t.saved = {};
        return out;
    };
    // Any user who may run a pod somewhere, named to look like Slurm job 4242's.
    append(t.container("team-a_slurm-job-4242-worker-0_1", "c") + "/0.log", "2026-11-29T21:52:22Z stdout F a\n");
    append(t.container("slurm_my-slurm-job-4242_2", "c") + "/0.log", "2026-11-29T21:52:22Z stdout F b\n");
    append(t.container("slurm_slurm-job-4242-worker-0_3", "c") + "/0.log", "2026-11-29T21:52:22Z stdout F c\n");
    // By default no pod gets a job id.
    CHECK(ids() == std::map<std::string, std::string>{{"a", ""}, {"b", ""}, {"c", ""}});
    // The site's Slurm namespace: only its pods, and only a name the pattern matches whole.
    t.cfg.job_id_namespaces = {"slurm"};
    CHECK(ids() == std::map<std::string, std::string>{{"a", ""}, {"b", ""}, {"c", "4242"}});
}

TEST_CASE("pods nccl_containers: a container is NCCL's only when its whole name matches", "[pods]") {
    Tree t;  // nccl_containers: [trainer]
    append(t.container("ns_p_1", "trainer") + "/0.log", "2026-11-29T21:52:22Z stdout F t\n");
    append(t.container("ns_p_1", "trainer-exporter") + "/0.log", "2026-11-29T21:52:22Z stdout F e\n");
    append(t.container("ns_p_1", "my-trainer") + "/0.log", "2026-11-29T21:52:22Z stdout F m\n");
    auto s = t.source();
    std::map<std::string, jobtrail::node::StreamKind> kinds;
    for (const auto& e : t.poll(*s)) kinds[e.line] = e.origin->kind;
    using jobtrail::node::StreamKind;
    CHECK(kinds == std::map<std::string, StreamKind>{
                       {"t", StreamKind::kNccl}, {"e", StreamKind::kPod}, {"m", StreamKind::kPod}});
}
