#include "forensics/bundle/timeline.hpp"

#include <fcntl.h>
#include <sys/resource.h>

#include <filesystem>
#include <memory>
#include <optional>
#include <queue>
#include <vector>

namespace jobtrail::forensics::bundle {
namespace {

std::string source_of(const std::string& rel) {
    if (rel.rfind("nccl/", 0) == 0) return "nccl";
    return std::filesystem::path(rel).stem().string();
}

std::string node_of(const std::string& rel) {
    const auto p = std::filesystem::path(rel);
    auto it = p.begin();
    if (it == p.end()) return "";
    ++it;  // nodes/<node>/... or nccl/<node>/...
    return it == p.end() ? "" : it->string();
}

}  // namespace

namespace {

// The merge holds one descriptor per staged file (a job's local NCCL files alone may be 1,024):
// as many as the hard limit allows, rather than a bundle that fails at a soft 1,024.
void raise_open_files_limit() {
    struct rlimit rl {};
    if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        ::setrlimit(RLIMIT_NOFILE, &rl);
    }
}

}  // namespace

void write_timeline(const Staging& st) {
    raise_open_files_limit();
    struct Cursor {
        File f;
        std::optional<LineReader> in;
        std::string line, node, source;
    };
    std::vector<std::unique_ptr<Cursor>> cs;
    for (const auto& rel : st.files()) {
        auto c = std::make_unique<Cursor>();
        c->f = st.stream(rel, O_RDONLY, "r");
        c->in.emplace(c->f.get());
        c->node = node_of(rel);
        c->source = source_of(rel);
        if (c->in->next(c->line)) cs.push_back(std::move(c));
    }
    auto later = [&](size_t a, size_t b) {
        // RFC 3339 with nine digits, all UTC: text order is time order.
        return cs[a]->line.compare(0, 30, cs[b]->line, 0, 30) > 0;
    };
    std::priority_queue<size_t, std::vector<size_t>, decltype(later)> heap(later);
    for (size_t i = 0; i < cs.size(); ++i) heap.push(i);
    const File out = st.stream("timeline.txt", O_CREAT, "w");
    while (!heap.empty()) {
        const size_t i = heap.top();
        heap.pop();
        Cursor& c = *cs[i];
        const size_t sp = c.line.find(' ');
        const std::string_view l = c.line;
        Staging::put(
            out.get(),
            {l.substr(0, sp), " ", c.node, " ", c.source, " ", sp == std::string::npos ? "" : l.substr(sp + 1), "\n"},
            "timeline.txt");
        if (c.in->next(c.line)) heap.push(i);
    }
    Staging::finish(out.get(), "timeline.txt");
}

}  // namespace jobtrail::forensics::bundle
