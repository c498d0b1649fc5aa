#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>

#include <cstdlib>
#include <utility>
#include <vector>

#include "shipper/sources/file/file_source.hpp"

namespace jobtrail::shipper {
namespace {

// found(name, st, value) for each regular file of `dir` whose inode is one of `want`'s. One
// listing per directory, d_ino compared: ten thousand renamed files are not ten thousand
// listings of their directory. Neither the directory nor a file is followed through a link.
template <class T, class Found>
void by_inode(const std::string& dir, const std::map<ino_t, T>& want, Found found) {
    Fd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!dfd.valid()) return;
    DIR* d = ::fdopendir(dfd.get());
    if (d == nullptr) return;
    dfd.release();  // closedir closes it
    while (const dirent* e = ::readdir(d)) {
        const auto w = want.find(e->d_ino);
        if (w == want.end()) continue;
        struct stat st {};
        if (::fstatat(::dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
        found(e->d_name, st, w->second);
    }
    ::closedir(d);
}

}  // namespace

void FileSource::find_renamed() {
    // A file we had not finished may have been renamed away (rotation) while we were down: it
    // no longer matches the globs, so look for its inode beside its old name and finish it.
    std::map<std::string, std::map<ino_t, std::string>> by_dir;  // dir -> inode -> key
    for (const auto& [key, saved] : saved_) {
        const auto p = saved_paths_.find(key);
        if (files_.count(key) || p == saved_paths_.end()) continue;
        by_dir[dir_of(p->second)][static_cast<ino_t>(std::strtoull(key.c_str() + key.find(':') + 1, nullptr, 10))] =
            key;
    }
    std::vector<std::pair<std::string, struct stat>> found;
    for (const auto& [dir, want] : by_dir)
        by_inode(dir, want, [&](const char* name, const struct stat& st, const std::string& key) {
            if (key_of(st.st_dev, st.st_ino) != key) return;
            if (static_cast<uint64_t>(st.st_size) > saved_[key].second) found.emplace_back(dir + "/" + name, st);
        });
    for (const auto& [path, st] : found) adopt(path, st, false, stream_of(path));
}

void FileSource::find_moved() {
    // A closed file gone from the globs may have been renamed away after its last lines were
    // written (rotation): an open one is finished through its descriptor, a closed one is
    // looked for by inode beside its old name.
    std::map<std::string, std::map<ino_t, Tracked*>> by_dir;
    for (auto& [k, t] : files_)
        if (!t.seen && !t.fd.valid()) by_dir[dir_of(t.path)][t.ino] = &t;
    for (const auto& [dir, want] : by_dir)
        by_inode(dir, want, [&](const char* name, const struct stat& st, Tracked* t) {
            if (st.st_dev != t->dev || st.st_ino != t->ino) return;
            t->path = dir + "/" + name;
            if (static_cast<uint64_t>(st.st_size) != t->size || !same_time(st.st_mtim, t->mtime)) {
                t->stale = true;
                t->size = static_cast<uint64_t>(st.st_size);
                t->mtime = st.st_mtim;
            }
        });
}

}  // namespace jobtrail::shipper
