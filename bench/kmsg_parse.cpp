// Prints how many /dev/kmsg records per second we parse, and how many per second go through
// parse + event extraction, over a realistic mix of kernel messages.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "collector/kernel_ring.hpp"
#include "events/extractor.hpp"
#include "kmsg/record.hpp"

namespace {

std::vector<std::string> make_records(size_t n) {
    const char* texts[] = {
        "nvidia 0000:3b:00.0: enabling device (0000 -> 0003)\n SUBSYSTEM=pci\n DEVICE=+pci:0000:3b:00.0\n",
        "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n",
        "mlx5_core 0000:5e:00.0: mlx5e_open_channels:2580:(pid 1234): opened 64 channels\n",
        "IPv6: ADDRCONF(NETDEV_CHANGE): ib0: link becomes ready\n",
        "python3[41234]: segfault at 0 ip 00007f0000000000 sp 00007ffd00000000 error 4 in libc.so.6\n",
        "NVRM: Xid (PCI:0000:3b:00): 13, pid=41234, name=python3, Graphics SM Warp Exception on (GPC 0, TPC 1, SM 0)\n",
        "audit: type=1400 audit(1700000000.123:45): apparmor=\"STATUS\" operation=\"profile_load\"\n",
        "EXT4-fs (nvme0n1p1): mounted filesystem with ordered data mode. Quota mode: none.\n",
    };
    std::vector<std::string> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i)
        out.push_back("6," + std::to_string(i) + "," + std::to_string(1000000 + i * 37) + ",-;" +
                      texts[i % (sizeof texts / sizeof texts[0])]);
    return out;
}

}  // namespace

int main() {
    const auto recs = make_records(200'000);
    size_t bytes = 0;
    for (const auto& r : recs) bytes += r.size();
    jobtrail::kmsg::Record rec;
    jobtrail::kmsg::ParseError err;
    const jobtrail::events::Extractor ex;
    const int rounds = 10;
    size_t ok = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < rounds; ++k)
        for (const auto& r : recs) ok += jobtrail::kmsg::parse_record(r, rec, err);
    const double parse_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    size_t events = 0;
    t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < rounds; ++k)
        for (const auto& r : recs)
            if (jobtrail::kmsg::parse_record(r, rec, err) && ex.extract(rec)) ++events;
    const double both_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double n = static_cast<double>(recs.size()) * rounds;
    std::printf("kmsg records: %zu x %d rounds, %.1f bytes/record average\n", recs.size(), rounds,
                static_cast<double>(bytes) / static_cast<double>(recs.size()));
    std::printf("parse only:            %.2f M records/s (%zu parsed)\n", n / parse_s / 1e6, ok);
    std::printf("parse + event extract: %.2f M records/s (%zu events)\n", n / both_s / 1e6, events);

    // The real device: what one record costs to read (one syscall each) and parse, scaled to a
    // 1 MiB ring (the size the collector benchmark asks about; this machine's ring is smaller).
    size_t scanned = 0;
    size_t scan_bytes = 0;
    const int scans = 50;
    t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < scans; ++k) {
        const auto res = jobtrail::collector::scan_ring(
            "/dev/kmsg", 5000,
            [&](std::string_view raw, uint64_t) {
                ++scanned;
                scan_bytes += raw.size();
                (void)jobtrail::kmsg::parse_record(raw, rec, err);
            },
            [](uint64_t) {});
        if (!res.ok) {
            std::printf("real /dev/kmsg: %s\n", res.error.c_str());
            return 0;
        }
    }
    const double scan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double us_per_rec = scan_s * 1e6 / static_cast<double>(scanned);
    const double rec_bytes = static_cast<double>(scan_bytes) / static_cast<double>(scanned);
    std::printf("real /dev/kmsg read+parse: %.2f us/record (%zu records/scan, %.0f bytes/record)\n", us_per_rec,
                scanned / scans, rec_bytes);
    std::printf("  => a full 1 MiB ring (~%.0f records) costs %.1f ms to scan\n", 1048576.0 / rec_bytes,
                1048576.0 / rec_bytes * us_per_rec / 1000.0);
    return 0;
}
