#include "dcgm/client.hpp"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "dcgm/api.hpp"
#include "skip.hpp"
#include "temp_dir.hpp"
#include "unix_socket.hpp"

using namespace jobtrail;
using namespace std::chrono_literals;
using dcgm::Kind;

namespace {

// The stand-in libdcgm (tests/fixtures/dcgm) and its control directory.
struct Stub {
    test::TempDir dir{"dcgm"};
    Stub() { ::setenv("DCGM_STUB_DIR", dir.path().c_str(), 1); }
    void write(const std::string& name, const std::string& text) const {
        std::ofstream(dir.path() + "/" + name) << text;
    }
    void command(const std::string& line) const {
        std::ofstream(dir.path() + "/commands", std::ios::app) << line << "\n";
    }
    int logged(const std::string& line) const {
        std::ifstream in(dir.path() + "/log");
        int n = 0;
        for (std::string l; std::getline(in, l);) n += l == line;
        return n;
    }
};

dcgm::ClientOptions options(const char* library, int timeout_ms = 5000) {
    dcgm::ClientOptions o;
    o.libraries = {library};
    o.call_timeout_ms = timeout_ms;
    return o;
}

// The events a sink received (on the stub's thread).
struct Received {
    std::mutex mu;
    std::vector<dcgm::Event> events;
    std::function<void(dcgm::Event)> sink() {
        return [this](dcgm::Event e) {
            std::lock_guard lock(mu);
            events.push_back(std::move(e));
        };
    }
    size_t size() {
        std::lock_guard lock(mu);
        return events.size();
    }
    // Waits (up to 5 s: the stub reads its commands every 50 ms) until n events arrived.
    bool wait(size_t n) {
        for (int i = 0; i < 500 && size() < n; ++i) std::this_thread::sleep_for(10ms);
        return size() >= n;
    }
};

template <class F>
bool eventually(F f) {
    for (int i = 0; i < 500; ++i) {
        if (f()) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

}  // namespace

TEST_CASE("the DCGM client connects through libdcgm 4.x and 3.x and lists the GPUs with their bus ids",
          "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0\n");
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    CHECK(client->library() ==
          std::string(library) + (std::string(library).ends_with(".4") ? " (DCGM 4.x API)" : " (DCGM 3.x API)"));
    const auto gpus = client->gpus(error);
    REQUIRE(gpus.size() == 2);
    CHECK(gpus[0].id == 0);
    CHECK(gpus[0].pci_bdf == "00000000:3B:00.0");
    CHECK(gpus[1].id == 3);
    CHECK(gpus[1].pci_bdf == "00000000:DB:00.0");
    CHECK(stub.logged("connect") == 1);
}

TEST_CASE("each kind of DCGM policy violation arrives as its event, on the GPU it happened on", "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0\n");
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    Received got;
    REQUIRE(client->watch_violations(got.sink(), error));
    stub.command("violation 3 xid 1700000000000001 79");
    stub.command("violation 3 dbe 1700000000000002 2 2");
    stub.command("violation 3 pcie 1700000000000003 120");
    stub.command("violation 3 mpr 1700000000000004 0 64");
    stub.command("violation 0 thermal 1700000000000005 95");
    stub.command("violation 0 power 1700000000000006 720");
    stub.command("violation 0 nvlink 1700000000000007 12 449");
    REQUIRE(got.wait(7));
    std::vector<std::string> lines;
    for (const auto& e : got.events) lines.push_back(dcgm::format_line(e));
    CHECK(lines == std::vector<std::string>{
                       "XID 79 on GPU 3",
                       "Double-bit ECC error on GPU 3: 2 errors in device",
                       "PCIe replay errors on GPU 3: counter 120",
                       "Retired pages limit on GPU 3: 0 single-bit, 64 double-bit",
                       "Thermal violation on GPU 0: 95 C",
                       "Power violation on GPU 0: 720 W",
                       "NVLink errors on GPU 0: counter 12 (field 449)",
                   });
    for (size_t i = 0; i < got.events.size(); ++i) {
        CHECK(got.events[i].ts_us == 1700000000000001 + static_cast<int64_t>(i));
        CHECK(got.events[i].pci_bdf == (i < 4 ? "00000000:DB:00.0" : "00000000:3B:00.0"));
    }
    // Every condition, thermal and power at the GPUs' slowdown temperature and power limit.
    CHECK(stub.logged("register mask=0x7f") == (std::string(library).ends_with(".4") ? 1 : 2));
    client->disconnect();
    stub.command("violation 3 xid 1700000000000008 48");
    std::this_thread::sleep_for(200ms);  // four command polls of the stub
    CHECK(got.size() == 7);
}

TEST_CASE("a DCGM health incident is listed with its DCGM_FR name until it clears", "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    auto first = client->health(error);
    REQUIRE(first);
    CHECK(first->empty());
    CHECK(stub.logged("health_set systems=0xffffffff") == 1);
    stub.command("incident 0 4 mem fail A volatile double-bit ECC error was detected");
    stub.command("incident 0 999 0x4000 warn future");
    std::optional<std::vector<dcgm::Incident>> now;
    REQUIRE(eventually([&] { return (now = client->health(error)) && now->size() == 2; }));
    CHECK((*now)[0].gpu == 0);
    CHECK((*now)[0].code == "DCGM_FR_VOLATILE_DBE_DETECTED");
    CHECK((*now)[0].system == "mem");
    CHECK((*now)[0].health == "fail");
    CHECK((*now)[0].message == "A volatile double-bit ECC error was detected");
    CHECK((*now)[1].code == "DCGM_FR_999");
    CHECK((*now)[1].system == "system_0x4000");
    CHECK((*now)[1].health == "warn");
    stub.command("clear 0 4");
    REQUIRE(eventually([&] { return (now = client->health(error)) && now->size() == 1; }));
    CHECK((*now)[0].code == "DCGM_FR_999");
    CHECK(stub.logged("health_set systems=0xffffffff") == 1);  // set once per connection
}

TEST_CASE("after a DCGM host engine restart only a new registration gets violations", "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    Received before;
    REQUIRE(client->watch_violations(before.sink(), error));
    REQUIRE(client->health(error));

    stub.write("state", "down");
    CHECK_FALSE(client->health(error));
    CHECK(error == "dcgmHealthCheck: Connection to the host engine is not valid any longer (-21)");
    CHECK_FALSE(client->connect(error));
    CHECK(error == "dcgmConnect_v2(127.0.0.1): Connection to the host engine is not valid any longer (-21)");
    stub.write("state", "up");
    stub.command("violation 0 xid 1700000000000001 31");
    std::this_thread::sleep_for(300ms);  // six command polls: the stub has handled it

    REQUIRE(client->connect(error));
    Received after;
    REQUIRE(client->watch_violations(after.sink(), error));
    REQUIRE(client->health(error));
    stub.command("violation 0 xid 1700000000000002 79");
    REQUIRE(after.wait(1));
    CHECK(after.events[0].value == 79);
    CHECK(after.size() == 1);
    CHECK(before.size() == 0);
    CHECK(stub.logged("connect") == 2);
    CHECK(stub.logged("register mask=0x7f") == 2);
    CHECK(stub.logged("health_set systems=0xffffffff") == 2);  // set again after the restart
}

TEST_CASE("a stalled DCGM call costs the client its time bound, not a hang", "[dcgm-client]") {
    Stub stub;
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4, 200));
    std::string error;
    REQUIRE(client->connect(error));
    stub.write("state", "stall");
    const auto start = std::chrono::steady_clock::now();
    CHECK_FALSE(client->health(error));
    CHECK(error == "dcgmHealthSet: no answer within 200 ms");
    // While the stuck call has not returned, no other call is made.
    CHECK_FALSE(client->connect(error));
    CHECK(error == "an earlier DCGM call has not returned yet");
    client.reset();                                        // does not wait for the stuck call
    CHECK(std::chrono::steady_clock::now() - start < 3s);  // a bound that a hang would break, not a benchmark

    auto second = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4, 200));
    stub.write("state", "up");
    CHECK(eventually([&] { return second->connect(error); }));
    CHECK(second->health(error));
}

TEST_CASE("the DCGM client connects to the address it is given, a unix socket included", "[dcgm-client]") {
    Stub stub;
    auto slurp = [&] {
        std::ifstream in(stub.dir.path() + "/address");
        std::string line;
        std::getline(in, line);
        return line;
    };
    std::string error;
    auto o = options(JOBTRAIL_DCGM_STUB4, 1500);
    REQUIRE(dcgm::make_client(o)->connect(error));
    CHECK(slurp() == "127.0.0.1 unix=0 timeout_ms=1500");
    o.address = "10.0.0.7:5555";
    REQUIRE(dcgm::make_client(o)->connect(error));
    CHECK(slurp() == "10.0.0.7:5555 unix=0 timeout_ms=1500");
    o.address = "unix:/run/nvidia-dcgm/hostengine.sock";
    REQUIRE(dcgm::make_client(o)->connect(error));
    CHECK(slurp() == "/run/nvidia-dcgm/hostengine.sock unix=1 timeout_ms=1500");
}

TEST_CASE("the DCGM client does not connect to a socket another local user holds, and says so", "[dcgm-client]") {
    if (geteuid() != 0) JOBTRAIL_SKIP("needs root to give the socket to another user");
    Stub stub;
    const std::string path = jobtrail::test::unix_socket_at(stub.dir.path() + "/hostengine.sock", 65534);
    auto o = options(JOBTRAIL_DCGM_STUB4);
    o.address = "unix:" + path;
    auto client = dcgm::make_client(o);
    std::string error;
    CHECK_FALSE(client->connect(error));
    CHECK(error.starts_with("not connecting to unix:" + path + ": "));
    CHECK(error.find("uid 65534") != std::string::npos);
    CHECK(stub.logged("connect") == 0);
    CHECK(client->gpus(error).empty());
    CHECK(error == "not connected to DCGM");
}

TEST_CASE("the DCGM client says which libraries it tried and why none would do", "[dcgm-client]") {
    std::string error;
    dcgm::ClientOptions o;
    o.libraries = {"/nonexistent/libdcgm.so.4", "libdcgm-absent.so.3", "libm.so.6"};
    auto client = dcgm::make_client(o);
    CHECK_FALSE(client->connect(error));
    CHECK(error.find("/nonexistent/libdcgm.so.4: cannot open shared object file") != std::string::npos);
    CHECK(error.find("libdcgm-absent.so.3: cannot open shared object file") != std::string::npos);
    CHECK(error.find("libm.so.6: no symbol dcgmInit") != std::string::npos);
    CHECK(client->library().empty());
    CHECK_FALSE(client->health(error));
    CHECK(error == "not connected to DCGM");
}

TEST_CASE("the stand-in libdcgm refuses struct versions of the other major, as DCGM does", "[dcgm-client]") {
    Stub stub;
    for (const auto& [path, wrong_health_version] :
         {std::pair{JOBTRAIL_DCGM_STUB4, dcgm::api::kHealthResponseVersion4},
          std::pair{JOBTRAIL_DCGM_STUB3, dcgm::api::kHealthResponseVersion5}}) {
        void* lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        REQUIRE(lib);
        auto init = reinterpret_cast<dcgm::api::FnInit>(dlsym(lib, "dcgmInit"));
        auto connect = reinterpret_cast<dcgm::api::FnConnectV2>(dlsym(lib, "dcgmConnect_v2"));
        auto check = reinterpret_cast<dcgm::api::FnHealthCheck>(dlsym(lib, "dcgmHealthCheck"));
        REQUIRE(init() == dcgm::api::kOk);
        dcgm::api::ConnectV2Params params{dcgm::api::kConnectV2ParamsVersion2 + 1, 0, 1000, 0};
        dcgm::api::Handle h = 0;
        CHECK(connect("127.0.0.1", &params, &h) == dcgm::api::kVerMismatch);
        params.version = dcgm::api::kConnectV2ParamsVersion2;
        REQUIRE(connect("127.0.0.1", &params, &h) == dcgm::api::kOk);
        auto buffer = std::make_unique<dcgm::api::HealthResponseV5>();
        buffer->version = wrong_health_version;
        CHECK(check(h, dcgm::api::kGroupAllGpus, buffer.get()) == dcgm::api::kVerMismatch);
    }
}

TEST_CASE("a GPU lost since DCGM listed it, or one DCGM has no bus id for, costs the other GPUs nothing",
          "[dcgm-client]") {
    // A GPU that fell off the bus between DCGM's listing and its attributes: DCGM_ST_GPU_IS_LOST,
    // and DCGM refuses a policy on a group holding it. Neither may end every other GPU's events.
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0 lost\n5 00000000:E1:00.0\n6 <<<NULL>>>\n");
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    const auto gpus = client->gpus(error);
    CHECK(error.empty());
    REQUIRE(gpus.size() == 4);
    CHECK(gpus[0].pci_bdf == "00000000:3B:00.0");
    CHECK(gpus[0].problem.empty());
    CHECK(gpus[1].id == 3);
    CHECK(gpus[1].pci_bdf.empty());
    CHECK(gpus[1].problem == "dcgmGetDeviceAttributes(3): GPU is lost (-18)");
    CHECK(gpus[2].pci_bdf == "00000000:E1:00.0");
    CHECK(gpus[3].pci_bdf.empty());  // DCGM's blank is no address
    CHECK(gpus[3].problem == "DCGM has no PCI bus id for GPU 6 (\"<<<NULL>>>\")");

    Received got;
    REQUIRE(client->watch_violations(got.sink(), error));
    stub.command("violation 5 dbe 1700000000000002 2 2");
    stub.command("violation 6 xid 1700000000000003 48");
    REQUIRE(got.wait(2));
    std::lock_guard lock(got.mu);
    CHECK(got.events[0].gpu == 5);
    CHECK(got.events[0].pci_bdf == "00000000:E1:00.0");
    CHECK(got.events[1].gpu == 6);
    CHECK(got.events[1].value == 48);
    CHECK(got.events[1].pci_bdf.empty());
}

TEST_CASE("a DCGM connection lost while listing the GPUs ends the listing with DCGM's reason", "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    stub.write("state", "down");
    CHECK(client->gpus(error).empty());
    CHECK(error == "dcgmGetAllSupportedDevices: Connection to the host engine is not valid any longer (-21)");
}

TEST_CASE("a DCGM error other than a lost GPU ends the listing and says which GPU", "[dcgm-client]") {
    // Not taken for one GPU's trouble: the source reports the failure and tries again later,
    // rather than watching with every GPU's bus id unknown.
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0 failing\n");
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4));
    std::string error;
    REQUIRE(client->connect(error));
    CHECK(client->gpus(error).empty());
    CHECK(error == "dcgmGetDeviceAttributes(3): Unknown error (-3)");
}

TEST_CASE("a bus id placeholder is shown in printable ASCII from space to tilde and at most 32 characters",
          "[dcgm-client]") {
    // What DCGM hands out instead of an address goes into a log line: control bytes and DEL are
    // left out, a space and '~' kept, and a long one is cut.
    Stub stub;
    const std::string long_id = "<<<" + std::string(40, 'x') + ">>>";
    stub.write("gpus", "0 00000000:3B:00.0\n7 <<<N/A\\x20pending\\x01\\x1f\\x7f~>>>\n8 " + long_id + "\n");
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4));
    std::string error;
    REQUIRE(client->connect(error));
    const auto gpus = client->gpus(error);
    REQUIRE(gpus.size() == 3);
    CHECK(gpus[1].problem == "DCGM has no PCI bus id for GPU 7 (\"<<<N/A pending~>>>\")");
    CHECK(gpus[2].problem == "DCGM has no PCI bus id for GPU 8 (\"" + long_id.substr(0, 32) + "\")");
}

TEST_CASE("DCGM watches thermal and power at the lowest slowdown temperature and power limit of the GPUs",
          "[dcgm-client]") {
    // 4.x: one policy for all GPUs, at the lowest of each; 3.x: one per GPU, at its own. A value
    // DCGM does not know (0, its blank 0x7ffffff0 and above) is no threshold.
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    const bool v4 = std::string(library).ends_with(".4");
    Stub stub;
    stub.write("gpus",
               "0 00000000:1B:00.0 slowdown=90 power=700\n"
               "1 00000000:3B:00.0 slowdown=0 power=2147483632\n"
               "2 00000000:5D:00.0 slowdown=85 power=650\n"
               "3 00000000:DB:00.0 slowdown=2147483632 power=0\n"
               "4 00000000:E1:00.0 slowdown=2147483633 power=680\n");
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    Received got;
    REQUIRE(client->watch_violations(got.sink(), error));
    if (v4) {
        CHECK(stub.logged("policy_set mask=0x7f pages=60 thermal=85 power=650") == 1);
    } else {
        CHECK(stub.logged("policy_set mask=0x7f pages=60 thermal=90 power=700") == 1);
        CHECK(stub.logged("policy_set mask=0x67 pages=60") == 2);  // GPUs 1 and 3: neither known
        CHECK(stub.logged("policy_set mask=0x77 pages=60 power=680") == 1);
        CHECK(stub.logged("policy_set mask=0x7f pages=60 thermal=85 power=650") == 1);
        CHECK(stub.logged("register mask=0x67") == 2);
    }
}

TEST_CASE("GPUs whose slowdown temperature and power limit DCGM does not know are watched without either",
          "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    stub.write("gpus",
               "0 00000000:1B:00.0 slowdown=2147483632 power=0\n"
               "1 00000000:3B:00.0 slowdown=0 power=2147483632\n");
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    Received got;
    REQUIRE(client->watch_violations(got.sink(), error));
    CHECK(stub.logged("policy_set mask=0x67 pages=60") == (std::string(library).ends_with(".4") ? 1 : 2));
    CHECK(stub.logged("register mask=0x67") == (std::string(library).ends_with(".4") ? 1 : 2));
    // The rest still arrives.
    stub.command("violation 1 xid 1700000000000001 79");
    REQUIRE(got.wait(1));
    CHECK(dcgm::format_line(got.events[0]) == "XID 79 on GPU 1");
}

TEST_CASE("connecting again first lets go of the connection before and its registrations", "[dcgm-client]") {
    // The source connects again when a health check fails: the old connection is not left open
    // in the host engine, and the old sink gets nothing more.
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    CHECK(stub.logged("disconnect") == 0);  // nothing to let go of yet
    Received before;
    REQUIRE(client->watch_violations(before.sink(), error));
    REQUIRE(client->connect(error));
    CHECK(stub.logged("connect") == 2);
    CHECK(stub.logged("unregister") == 1);
    CHECK(stub.logged("disconnect") == 1);
    Received after;
    REQUIRE(client->watch_violations(after.sink(), error));
    stub.command("violation 0 xid 1700000000000001 79");
    REQUIRE(after.wait(1));
    CHECK(before.size() == 0);
}

TEST_CASE("watching again replaces the registration and the end withdraws each one once", "[dcgm-client]") {
    const char* library = GENERATE(JOBTRAIL_DCGM_STUB4, JOBTRAIL_DCGM_STUB3);
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0\n");
    const int per_watch = std::string(library).ends_with(".4") ? 1 : 2;  // 3.x: one per GPU
    auto client = dcgm::make_client(options(library));
    std::string error;
    REQUIRE(client->connect(error));
    Received first, second;
    REQUIRE(client->watch_violations(first.sink(), error));
    REQUIRE(client->watch_violations(second.sink(), error));
    CHECK(stub.logged("register mask=0x7f") == 2 * per_watch);
    CHECK(stub.logged("unregister") == per_watch);
    stub.command("violation 3 xid 1700000000000001 79");
    REQUIRE(second.wait(1));
    CHECK(first.size() == 0);
    client->disconnect();
    CHECK(stub.logged("unregister") == 2 * per_watch);
    CHECK(stub.logged("disconnect") == 1);
    // 3.x: each GPU's own group is destroyed with its registration; 4.x's all-GPUs group is DCGM's.
    std::ifstream log(stub.dir.path() + "/log");
    int destroyed = 0;
    for (std::string l; std::getline(log, l);) destroyed += l.starts_with("group_destroy");
    CHECK(destroyed == (per_watch == 1 ? 0 : 4));
    client->disconnect();  // nothing left to let go of
    CHECK(stub.logged("unregister") == 2 * per_watch);
    CHECK(stub.logged("disconnect") == 1);
}

TEST_CASE("watching for violations needs a connection that works and says so", "[dcgm-client]") {
    Stub stub;
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4));
    std::string error;
    Received got;
    CHECK_FALSE(client->watch_violations(got.sink(), error));
    CHECK(error == "not connected to DCGM");
    REQUIRE(client->connect(error));
    stub.write("state", "down");
    error.clear();
    CHECK_FALSE(client->watch_violations(got.sink(), error));
    CHECK(error == "dcgmGetAllSupportedDevices: Connection to the host engine is not valid any longer (-21)");
    CHECK_FALSE(client->watch_violations(got.sink(), error));
    CHECK(error == "the connection to DCGM was lost");
    CHECK(stub.logged("register mask=0x7f") == 0);
}

TEST_CASE("with libdcgm 3.x at most 32 GPUs are watched in one process and the 33rd is refused with why",
          "[dcgm-client]") {
    // 3.x calls back without the GPU: one callback function per GPU, 32 in all.
    Stub stub;
    std::string gpus;
    for (int i = 0; i < 20; ++i) gpus += std::to_string(i) + " 00000000:" + std::to_string(10 + i) + ":00.0\n";
    stub.write("gpus", gpus);
    auto a = dcgm::make_client(options(JOBTRAIL_DCGM_STUB3));
    auto b = dcgm::make_client(options(JOBTRAIL_DCGM_STUB3));
    std::string error;
    REQUIRE(a->connect(error));
    REQUIRE(b->connect(error));
    Received got_a, got_b;
    REQUIRE(a->watch_violations(got_a.sink(), error));
    CHECK_FALSE(b->watch_violations(got_b.sink(), error));
    CHECK(error == "more than 32 DCGM registrations in this process");
    CHECK(stub.logged("register mask=0x7f") == 32);  // a's 20, b's first 12
    // Those a lets go of are used again.
    a->disconnect();
    error.clear();
    CHECK(b->watch_violations(got_b.sink(), error));
    CHECK(error.empty());
    stub.command("violation 19 xid 1700000000000001 79");
    REQUIRE(got_b.wait(1));
    CHECK(got_b.events[0].pci_bdf == "00000000:29:00.0");
    CHECK(got_a.size() == 0);
}

TEST_CASE("with libdcgm 3.x a GPU DCGM will not group ends the watch with why and tries again hold one group at most",
          "[dcgm-client]") {
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0 ungroupable\n");
    const auto logged_starting = [&](const std::string& prefix) {
        std::ifstream in(stub.dir.path() + "/log");
        int n = 0;
        for (std::string l; std::getline(in, l);) n += l.starts_with(prefix);
        return n;
    };
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB3));
    std::string error;
    REQUIRE(client->connect(error));
    Received got;
    // The source tries again and again: every try says the same, none uses up the 32 slots.
    for (int i = 0; i < 33; ++i) {
        INFO("try " << i);
        error.clear();
        CHECK_FALSE(client->watch_violations(got.sink(), error));
        CHECK(error == "dcgmGroupAddDevice: Unknown error (-3)");
    }
    CHECK(logged_starting("group_create ") == 66);
    CHECK(logged_starting("group_destroy ") == 65);  // GPU 0's last group is still registered
    client->disconnect();
    CHECK(logged_starting("group_destroy ") == 66);
}

TEST_CASE("with libdcgm 3.x a GPU lost between its listing and its policy ends the watch and the next leaves it out",
          "[dcgm-client]") {
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0 lost-later\n5 00000000:E1:00.0\n");
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB3));
    std::string error;
    REQUIRE(client->connect(error));
    Received got;
    CHECK_FALSE(client->watch_violations(got.sink(), error));
    CHECK(error == "dcgmPolicySet: GPU is lost (-18)");
    CHECK(stub.logged("register mask=0x7f") == 1);  // GPU 0 only: GPU 5 was never reached
    // The source tries again: DCGM now says GPU 3 is lost, and the others are watched.
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0 lost\n5 00000000:E1:00.0\n");
    error.clear();
    REQUIRE(client->watch_violations(got.sink(), error));
    CHECK(error.empty());
    stub.command("violation 5 xid 1700000000000001 79");
    REQUIRE(got.wait(1));
    CHECK(got.events[0].pci_bdf == "00000000:E1:00.0");
}

TEST_CASE("a health answer in a version other than the one asked for is no answer and says both versions",
          "[dcgm-client]") {
    Stub stub;
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4));
    std::string error;
    REQUIRE(client->connect(error));
    REQUIRE(client->health(error));
    stub.write("health_version", "0x1234");
    error.clear();
    CHECK_FALSE(client->health(error));
    CHECK(error == "health response: version 0x1234, expected 0x" + [] {
        char b[16];
        std::snprintf(b, sizeof b, "%x", dcgm::api::kHealthResponseVersion5);
        return std::string(b);
    }());
}

TEST_CASE("a libdcgm whose dcgmInit fails is no library yet and is initialised again on the next connect",
          "[dcgm-client]") {
    Stub stub;
    stub.write("init_fails", "");
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4));
    std::string error;
    CHECK_FALSE(client->connect(error));
    CHECK(error == "dcgmInit: Unknown error (-3)");
    CHECK(client->library().empty());
    CHECK(stub.logged("connect") == 0);
    std::remove((stub.dir.path() + "/init_fails").c_str());
    error.clear();
    REQUIRE(client->connect(error));
    CHECK(client->library() == std::string(JOBTRAIL_DCGM_STUB4) + " (DCGM 4.x API)");
    CHECK(client->gpus(error).size() == 1);
}

TEST_CASE("a listing that fails lists no GPU of an earlier listing", "[dcgm-client]") {
    // Not the GPUs of the last listing that worked: the source would watch with stale bus ids.
    Stub stub;
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0\n");
    auto client = dcgm::make_client(options(JOBTRAIL_DCGM_STUB4));
    std::string error;
    REQUIRE(client->connect(error));
    REQUIRE(client->gpus(error).size() == 2);
    // One GPU's attributes fail.
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0 failing\n");
    CHECK(client->gpus(error).empty());
    CHECK(error == "dcgmGetDeviceAttributes(3): Unknown error (-3)");
    Received got;
    error.clear();
    CHECK_FALSE(client->watch_violations(got.sink(), error));
    CHECK(error == "dcgmGetDeviceAttributes(3): Unknown error (-3)");
    stub.write("gpus", "0 00000000:3B:00.0\n3 00000000:DB:00.0\n");
    REQUIRE(client->gpus(error).size() == 2);
    // The host engine goes: the listing fails, then the connection is known lost.
    stub.write("state", "down");
    CHECK(client->gpus(error).empty());
    CHECK(error == "dcgmGetAllSupportedDevices: Connection to the host engine is not valid any longer (-21)");
    CHECK(client->gpus(error).empty());
    CHECK(error == "the connection to DCGM was lost");
    CHECK(stub.logged("register mask=0x7f") == 0);
}
