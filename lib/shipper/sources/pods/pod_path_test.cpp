#include "shipper/sources/pods/pod_path.hpp"

#include <catch2/catch.hpp>
#include <string>

using jobtrail::shipper::parse_pod_log_path;

TEST_CASE("pod log paths: namespace, pod, uid and container from kubelet's tree", "[pods]") {
    const auto p = parse_pod_log_path("/var/log/pods",
                                      "/var/log/pods/train_llama-70b-0.workers_0f3c1a2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b/"
                                      "pytorch/3.log");
    REQUIRE(p.ok);
    CHECK(p.value.ns == "train");
    CHECK(p.value.pod == "llama-70b-0.workers");  // pod names are DNS subdomains: dots allowed
    CHECK(p.value.uid == "0f3c1a2e-5b6d-4e7f-8a9b-0c1d2e3f4a5b");
    CHECK(p.value.container == "pytorch");
    CHECK_FALSE(p.value.rotated);
    // A static pod's directory carries kubelet's hash instead of a UUID.
    CHECK(parse_pod_log_path("/r", "/r/kube-system_etcd-gpu01_9a3b5c7d9e1f3a5b7c9d1e3f5a7b9c1d/etcd/0.log").ok);
}

TEST_CASE("pod log paths: kubelet's rotated file is read, compressed and temporary files never", "[pods]") {
    const std::string dir = "/r/ns_pod_1234/c/";
    const auto rotated = parse_pod_log_path("/r", dir + "0.log.20261201-151100");
    REQUIRE(rotated.ok);
    CHECK(rotated.value.rotated);
    for (const char* f : {"0.log.20261201-151100.gz", "0.log.20261201-151100.gz.tmp", "0.log.tmp", "0.logx", "x.log",
                          ".log", "0.log.2026", "0.txt"}) {
        const auto r = parse_pod_log_path("/r", dir + f);
        CHECK_FALSE(r.ok);
        CHECK(r.error.find(f) != std::string::npos);  // says which file and why
    }
}

TEST_CASE("pod log paths: names Kubernetes would refuse are refused, and the error says which part", "[pods]") {
    // No '_' in a namespace, pod or container name (the API server's rules), so a fourth part,
    // upper case, or an empty part is not kubelet's.
    struct Case {
        const char* path;
        const char* says;
    };
    for (const auto& c :
         {Case{"/r/ns_my_pod_1234/c/0.log", "<namespace>_<pod>_<uid>"},
          Case{"/r/ns_pod/c/0.log", "<namespace>_<pod>_<uid>"}, Case{"/r/abc/c/0.log", "<namespace>_<pod>_<uid>"},
          Case{"/r/NS_pod_1234/c/0.log", "namespace 'NS'"}, Case{"/r/ns_-pod_1234/c/0.log", "pod name '-pod'"},
          Case{"/r/ns_pod..x_1234/c/0.log", "pod name 'pod..x'"}, Case{"/r/ns_pod_12 34/c/0.log", "pod uid '12 34'"},
          Case{"/r/ns_pod_/c/0.log", "pod uid ''"}, Case{"/r/ns_pod_1234/C_x/0.log", "container name 'C_x'"},
          Case{"/r/ns_pod_1234/0.log", "three levels"}, Case{"/r/ns_pod_1234/c/d/0.log", "three levels"},
          Case{"/other/ns_pod_1234/c/0.log", "not under /r"}}) {
        const auto r = parse_pod_log_path("/r", c.path);
        INFO(c.path << ": " << r.error);
        CHECK_FALSE(r.ok);
        CHECK(r.error.find(c.says) != std::string::npos);
    }
    const std::string label63(63, 'a'), label64(64, 'a');
    CHECK(parse_pod_log_path("/r", "/r/" + label63 + "_p_1/c/0.log").ok);
    CHECK_FALSE(parse_pod_log_path("/r", "/r/" + label64 + "_p_1/c/0.log").ok);
}

TEST_CASE("pod log paths: a pod uid is a UUID in either case or kubelet's hash, of at most 64 characters", "[pods]") {
    const auto uid_of = [](const std::string& uid) {
        const auto p = parse_pod_log_path("/r", "/r/ns_pod_" + uid + "/c/0.log");
        return p.ok ? p.value.uid : "refused: " + p.error;
    };
    // RFC 4122: hex digits are read in either case; the uid is kept as written.
    CHECK(uid_of("0F3C1A2E-5B6D-4E7F-8A9B-0C1D2E3F4A5B") == "0F3C1A2E-5B6D-4E7F-8A9B-0C1D2E3F4A5B");
    CHECK(uid_of("ABCDEF01-0000-4000-8000-abcdef012345") == "ABCDEF01-0000-4000-8000-abcdef012345");
    const std::string hash64(64, 'f'), hash65(65, 'f');
    CHECK(uid_of(hash64) == hash64);
    CHECK(uid_of(hash65).find("refused: ") == 0);
    CHECK(uid_of(hash65).find("pod uid '" + hash65 + "'") != std::string::npos);
    for (const char* bad : {"0G3C1A2E", "0f3c1a2e.5b6d", "@f3c1a2e"}) CHECK(uid_of(bad).find("refused: ") == 0);
}

TEST_CASE("pod log paths: every end of the characters Kubernetes allows is taken, the one beyond it refused",
          "[pods]") {
    const auto ok = [](const std::string& ns, const std::string& pod, const std::string& uid, const std::string& c,
                       const std::string& file = "0.log") {
        const auto p = parse_pod_log_path("/r", "/r/" + ns + "_" + pod + "_" + uid + "/" + c + "/" + file);
        INFO(ns << "_" << pod << "_" << uid << "/" << c << "/" << file << ": " << p.error);
        return p.ok && p.value.ns == ns && p.value.pod == pod && p.value.uid == uid && p.value.container == c;
    };
    // Lower-case letters and digits, first and last of each range, at both ends of every name.
    CHECK(ok("a", "z", "0", "9"));
    CHECK(ok("z0-9a", "9a-z0.a0-z9", "AF-af-09", "0a-z9"));
    for (const char* edge : {"`", "{", "/", ":", "A", "Z", "-"}) {
        INFO("edge " << edge);
        const std::string e = edge;
        if (e != "/") {
            CHECK_FALSE(ok(e + "x", "p", "1", "c"));
            CHECK_FALSE(ok("n", "p" + e, "1", "c"));
            CHECK_FALSE(ok("n", "p", "1", "c" + e));
        }
    }
    // Inside a name too: a dot or an upper-case letter between valid ends.
    CHECK_FALSE(ok("a.b", "p", "1", "c"));
    CHECK_FALSE(ok("n", "p", "1", "a.b"));
    CHECK_FALSE(ok("n", "p", "1", "aBc"));
    CHECK_FALSE(ok("n", "pQp", "1", "c"));
    // A pod name's labels: none empty, none starting or ending with '-'.
    CHECK_FALSE(ok("n", "p.", "1", "c"));
    CHECK_FALSE(ok("n", ".p", "1", "c"));
    CHECK_FALSE(ok("n", "p.-q", "1", "c"));
    CHECK_FALSE(ok("n", "p-.q", "1", "c"));
    // Up to 253 characters in all, in labels of up to 63.
    const std::string l63(63, 'p');
    const std::string pod253 = l63 + "." + l63 + "." + l63 + "." + std::string(61, 'q');
    REQUIRE(pod253.size() == 253);
    CHECK(ok("n", pod253, "1", "c"));
    CHECK_FALSE(ok("n", pod253 + "q", "1", "c"));
    CHECK_FALSE(ok("n", "p." + std::string(64, 'q'), "1", "c"));
    CHECK(ok("n", "p", "1", std::string(63, 'c')));
    CHECK_FALSE(ok("n", "p", "1", std::string(64, 'c')));
    // A uid's hex letters run A-F in upper case: 'A' and 'F' are taken, '@' and 'G' are not.
    CHECK(ok("n", "p", "A", "c"));
    CHECK(ok("n", "p", "F", "c"));
    CHECK_FALSE(ok("n", "p", "@", "c"));
    CHECK_FALSE(ok("n", "p", "G", "c"));
    // Restart counts and rotation stamps are digits 0-9; '/' and ':' sit either side of them.
    CHECK(ok("n", "p", "1", "c", "9.log"));
    CHECK(ok("n", "p", "1", "c", "10.log.20261231-235959"));
    CHECK(ok("n", "p", "1", "c", "0.log.09999999-000000"));
    for (const char* f : {":.log", "0.log.2026123:-235959", "0.log.20261231-23595:", "0.log.20261231+235959",
                          "0.log.20261231-2359590", "0.log.20261231-23595", "0.log-20261231-235959"})
        CHECK_FALSE(ok("n", "p", "1", "c", f));
}

TEST_CASE("pod log paths: a file is under the root only past a '/' after it", "[pods]") {
    CHECK(parse_pod_log_path("/r", "/r/n_p_1/c/0.log").ok);
    for (const char* path : {"/rx/n_p_1/c/0.log", "/r", "/r/", "/", ""}) {
        const auto p = parse_pod_log_path("/r", path);
        INFO(path);
        CHECK_FALSE(p.ok);
        CHECK(p.error.find("not under /r") != std::string::npos);
    }
}
