#include "shipper/sources/file/mounts.hpp"

#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "skip.hpp"
#include "temp_dir.hpp"
#include "unmount.hpp"

using namespace jobtrail::shipper;

namespace {

// A mount table as the kernel writes it: "<id> <parent> <major:minor> <root> <mount point> ...".
std::string mountinfo(const std::string& dir, const std::vector<std::string>& points) {
    const std::string path = dir + "/mountinfo";
    std::ofstream f(path);
    for (size_t i = 0; i < points.size(); ++i)
        f << 30 + i << " 1 0:" << 100 + i << " / " << points[i] << " rw,relatime shared:1 - tmpfs x rw\n";
    return path;
}

}  // namespace

TEST_CASE("mount points under a configured path through a link are known by its real path, and only under it",
          "[shipper]") {
    const jobtrail::test::TempDir d("mounts");
    const std::string& t = d.path();
    // /var/log/slurm -> /data/slurm as a site has it; beside it a plain directory whose name is
    // as long, and a sibling that begins like the link.
    REQUIRE(::mkdir((t + "/real").c_str(), 0755) == 0);
    REQUIRE(::symlink((t + "/real").c_str(), (t + "/link").c_str()) == 0);
    REQUIRE(::mkdir((t + "/plan").c_str(), 0755) == 0);
    MountPoints m(mountinfo(t, {"/", t + "/real/2", t + "/real2", t + "/plan/9", t + "/real/with\\040space"}));
    m.refresh();
    m.root(t + "/link");
    m.root(t + "/plan");  // no link: its paths are mountinfo's as they are

    CHECK(m.contains(t + "/link/2"));           // the mount, seen through the link
    CHECK(m.contains(t + "/link/with space"));  // mountinfo's \040 is a space
    CHECK_FALSE(m.contains(t + "/link/3"));
    CHECK_FALSE(m.contains(t + "/link/2/x"));  // inside a mount is no mount point
    // A path not under the link is not looked up through it: /plan/2 is no mount, though
    // /real/2 is and "plan" is as long as "link".
    CHECK_FALSE(m.contains(t + "/plan/2"));
    CHECK(m.contains(t + "/plan/9"));
    // Nor a sibling that merely begins with the link's name: /link2 is not /real2.
    CHECK_FALSE(m.contains(t + "/link2"));
    CHECK(m.contains(t + "/real2"));
    CHECK(m.contains(t + "/real/2"));  // the real path itself, as the kernel names it
}

TEST_CASE("a mount table's escapes are undone only where three octal digits follow", "[shipper]") {
    const jobtrail::test::TempDir d("mounts");
    const std::string& t = d.path();
    MountPoints m(mountinfo(t, {t + "/a\\011tab", t + "/back\\134slash", t + "/short\\04", t + "/not\\089"}));
    m.refresh();
    CHECK(m.contains(t + "/a\ttab"));
    CHECK(m.contains(t + "/back\\slash"));
    CHECK(m.contains(t + "/short\\04"));   // too few digits: as written
    CHECK(m.contains(t + "/not\\089"));    // 8 is no octal digit
    CHECK_FALSE(m.contains(t + "/notI"));  // not read as \0 8 9
}

TEST_CASE("a mount point unmounted since is no longer one, and one mounted since is", "[shipper]") {
    // The kernel's own table: it says when it changed, and the next refresh reads it anew.
    const jobtrail::test::TempDir d("mounts");
    const std::string a = d.path() + "/a", b = d.path() + "/b";
    REQUIRE(::mkdir(a.c_str(), 0755) == 0);
    REQUIRE(::mkdir(b.c_str(), 0755) == 0);
    if (::mount("jobtrail-test", a.c_str(), "tmpfs", 0, "size=64k") != 0)
        JOBTRAIL_SKIP(std::string("cannot mount a tmpfs here: ") + std::strerror(errno));
    const jobtrail::test::Unmount unmount{a, b};
    MountPoints m("/proc/self/mountinfo");
    m.refresh();
    CHECK(m.contains(a));
    CHECK_FALSE(m.contains(b));
    REQUIRE(::umount2(a.c_str(), 0) == 0);
    REQUIRE(::mount("jobtrail-test", b.c_str(), "tmpfs", 0, "size=64k") == 0);
    m.refresh();
    CHECK_FALSE(m.contains(a));
    CHECK(m.contains(b));
}
