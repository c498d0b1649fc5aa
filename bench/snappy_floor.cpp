// The floor the shipper is measured against: read a file in 1 MiB chunks and snappy-compress
// each (Debian's libsnappy), nothing else. Prints lines, bytes and CPU-s (user + sys) per million
// lines.   bench_snappy_floor FILE
#include <fcntl.h>
#include <snappy.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace {

double cpu_seconds() {
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
        return 2;
    }
    const int fd = ::open(argv[1], O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        std::perror(argv[1]);
        return 1;
    }
    const double t0 = cpu_seconds();
    std::vector<char> buf(1 << 20);
    std::string out;
    size_t lines = 0, bytes = 0, compressed = 0;
    for (;;) {
        const ssize_t n = ::read(fd, buf.data(), buf.size());
        if (n < 0) {
            std::perror("read");
            return 1;
        }
        if (n == 0) break;
        lines += static_cast<size_t>(std::count(buf.data(), buf.data() + n, '\n'));
        bytes += static_cast<size_t>(n);
        snappy::Compress(buf.data(), static_cast<size_t>(n), &out);
        compressed += out.size();
    }
    ::close(fd);
    const double cpu = cpu_seconds() - t0;
    std::printf("floor (read + snappy): %zu lines, %zu bytes -> %zu, %.3f CPU-s, %.3f CPU-s per million lines\n", lines,
                bytes, compressed, cpu, lines ? cpu * 1e6 / static_cast<double>(lines) : 0.0);
    return 0;
}
