#pragma once

#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "forensics/staging_dir.hpp"

namespace jobtrail::forensics::bundle {

// Files a bundle is being written into, below the staging directory; each source writes its
// own files, "<rfc3339> <line>" per record, in time order.
class Staging {
public:
    explicit Staging(StagingDir& dir) : dir_(dir) {}
    void write(const std::string& rel, int64_t ts, std::string_view line);
    // A job log's kernel lines go at their kernel time, hours before the lines written around
    // them: files that got such lines are put in time order here, as write_timeline needs.
    void close();
    const std::set<std::string>& files() const { return files_; }

    // A staged file as a stream in `mode`: a new one (flags O_CREAT), or one made before opened
    // with `flags`; always relative to the staging directory's descriptor.
    File stream(const std::string& rel, int flags, const char* mode) const;
    // Writes the parts; a short write (a full disk) throws, naming `what`: a bundle that lost
    // lines must fail (or be partial), never say it is complete.
    static void put(FILE* f, std::initializer_list<std::string_view> parts, const std::string& what);
    // Flushes `f`, throwing as put() does when anything written to it was lost.
    static void finish(FILE* f, const std::string& what);

private:
    void sort_file(const std::string& rel);
    void close_all();  // the open streams, each finished
    std::string path_of(const std::string& rel) const { return dir_.path() + "/" + rel; }

    StagingDir& dir_;
    std::mutex mu_;
    std::map<std::string, File> open_;
    std::set<std::string> files_;
    std::map<std::string, int64_t> last_;
    std::set<std::string> unordered_;
};

}  // namespace jobtrail::forensics::bundle
