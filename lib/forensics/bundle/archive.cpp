#include "forensics/bundle/archive.hpp"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <memory>

#include "common/fs.hpp"
#include "forensics/bundle.hpp"
#include "forensics/bundle/names.hpp"

namespace jobtrail::forensics {

namespace bundle {
namespace {

// libarchive says "Write error" alone: the file and the system's reason (a full disk, a quota)
// are what an operator acts on.
std::string archive_failure(struct archive* a, const std::string& path, const std::string& rel) {
    std::string why = std::string("cannot write ") + path + ": ";
    const char* said = archive_error_string(a);
    why += said ? said : "libarchive failed";
    if (archive_errno(a) > 0) why += ": " + errno_text(archive_errno(a));
    if (!rel.empty()) why += " (at " + rel + ")";
    return why;
}

// `out` is a new file.
Status write_archive(const StagingDir& dir, const std::string& top, const std::vector<std::string>& files,
                     const OutputFile& out, const std::string& path) {
    struct archive* a = archive_write_new();
    archive_write_add_filter_zstd(a);
    archive_write_set_format_pax_restricted(a);
    if (archive_write_open_fd(a, out.fd()) != ARCHIVE_OK) {
        auto st = Status::failure(archive_failure(a, path, ""));
        archive_write_free(a);
        return st;
    }
    const time_t now = ::time(nullptr);
    for (const auto& rel : files) {
        if (!clean_relative_path(top + "/" + rel)) continue;  // never a member that escapes on extraction
        auto in = dir.open_file(rel, O_RDONLY);
        struct stat sb {};
        if (!in.ok || ::fstat(in.value.get(), &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        struct archive_entry* e = archive_entry_new();
        archive_entry_set_pathname(e, (top + "/" + rel).c_str());
        archive_entry_set_size(e, sb.st_size);
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, kArchiveMode);
        archive_entry_set_mtime(e, now, 0);
        // A member cut short (a read error, a full disk) fails the archive: half a file in a
        // bundle that says it is complete would mislead whoever reads it.
        Status member;
        if (archive_write_header(a, e) != ARCHIVE_OK) member = Status::failure(archive_failure(a, path, rel));
        char buf[65536];
        int64_t copied = 0;
        for (ssize_t n; member.ok && (n = ::read(in.value.get(), buf, sizeof buf)) != 0;) {
            if (n < 0 && errno == EINTR) continue;
            if (n < 0) {
                member = Status::failure("cannot read staged " + rel + ": " + errno_text(errno));
            } else if (archive_write_data(a, buf, static_cast<size_t>(n)) != n) {
                member = Status::failure(archive_failure(a, path, rel));
            } else {
                copied += n;
            }
        }
        if (member.ok && copied != sb.st_size) member = Status::failure("staged " + rel + " changed while archived");
        archive_entry_free(e);
        if (!member.ok) {
            archive_write_free(a);
            return member;
        }
    }
    Status st;
    if (archive_write_close(a) != ARCHIVE_OK) st = Status::failure(archive_failure(a, path, ""));
    archive_write_free(a);
    return st;
}

}  // namespace

std::string sha256_fd(int fd) {
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> ctx(EVP_MD_CTX_new(), EVP_MD_CTX_free);
    EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
    char buf[65536];
    off_t at = 0;
    for (ssize_t n; (n = ::pread(fd, buf, sizeof buf, at)) != 0; at += n) {
        if (n < 0) return "";
        EVP_DigestUpdate(ctx.get(), buf, static_cast<size_t>(n));
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_DigestFinal_ex(ctx.get(), md, &n);
    static const char* hex = "0123456789abcdef";
    std::string out;
    for (unsigned int i = 0; i < n; ++i) {
        out += hex[md[i] >> 4];
        out += hex[md[i] & 15];
    }
    return out;
}

Published publish_archive(StagingDir& dir, const std::string& top, const std::vector<std::string>& files) {
    // Each written under a fresh name, then renamed onto the name claimed for it: what someone
    // put at a name (a link, a directory) is left alone and another name taken; half an archive
    // (its temporary file) goes with `archive`.
    Published out;
    auto failed = [&out](Status why) {
        out.status = std::move(why);
        return out;
    };
    auto claimed = dir.claim_output(top, ".tar.zst");
    if (!claimed.ok) return failed(Status::failure(claimed.error));
    const std::string name = claimed.value + ".tar.zst";
    out.path = dir.out_dir() + "/" + name;
    auto archive = dir.create_output(name, kArchiveMode);
    if (!archive.ok) return failed(Status::failure(archive.error));
    if (auto ws = write_archive(dir, claimed.value, files, archive.value, out.path); !ws.ok) return failed(ws);
    auto sums = dir.create_output(name + ".sha256", 0644);  // says nothing of the content
    if (!sums.ok) return failed(Status::failure(sums.error));
    if (!write_all(sums.value.fd(), sha256_fd(archive.value.fd()) + "  " + name + "\n"))
        return failed(Status::failure("cannot write " + out.path + ".sha256: " + errno_text(errno)));
    if (auto p = archive.value.publish(); !p.ok) return failed(p);
    out.published = true;
    out.status = sums.value.publish();  // the archive is there, without its checksum when this fails
    return out;
}

}  // namespace bundle

std::string sha256_file(const std::string& path) {
    const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return fd.valid() ? bundle::sha256_fd(fd.get()) : "";
}

}  // namespace jobtrail::forensics
