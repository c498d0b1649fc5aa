// jobtrail-dcgm-probe: the DCGM client's connect + register + one health check against a real
// host engine (scripts/dcgm-probe.sh runs it on a GPU machine), printing what the library
// answered. Not installed: a check of the stand-in library's fidelity.
//   jobtrail-dcgm-probe [--address A] [--library L]... [--timeout-ms N] [--listen-s N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>

#include "dcgm/api.hpp"
#include "dcgm/client.hpp"

using namespace jobtrail;

int main(int argc, char** argv) {
    dcgm::ClientOptions options;
    bool own_libraries = false;
    int listen_s = 5;
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string flag = argv[i], value = argv[i + 1];
        if (flag == "--address") {
            options.address = value;
        } else if (flag == "--library") {
            if (!own_libraries) options.libraries.clear();
            own_libraries = true;
            options.libraries.push_back(value);
        } else if (flag == "--timeout-ms") {
            options.call_timeout_ms = std::atoi(value.c_str());
        } else if (flag == "--listen-s") {
            listen_s = std::atoi(value.c_str());
        } else {
            std::fprintf(stderr, "jobtrail-dcgm-probe: unknown option %s\n", flag.c_str());
            return 2;
        }
    }
    namespace api = dcgm::api;
    std::printf(
        "struct versions sent: connect params 0x%x, device attributes 0x%x, policy 0x%x, "
        "callback response 3.x 0x%x / 4.x 0x%x, health response 3.x 0x%x / 4.x 0x%x\n",
        api::kConnectV2ParamsVersion2, api::kDeviceAttributesVersion3, api::kPolicyVersion1,
        api::kPolicyCallbackResponseVersion1, api::kPolicyCallbackResponseVersion2, api::kHealthResponseVersion4,
        api::kHealthResponseVersion5);
    auto client = dcgm::make_client(options);
    std::string error;
    if (!client->connect(error)) {
        std::printf("connect: FAILED: %s\n", error.c_str());
        return 1;
    }
    std::printf("connect: ok, library %s\n", client->library().c_str());
    const auto gpus = client->gpus(error);
    if (gpus.empty()) std::printf("gpus: none%s%s\n", error.empty() ? "" : ": ", error.c_str());
    for (const auto& g : gpus)
        std::printf("gpu %u pci_bdf %s%s%s\n", g.id, g.pci_bdf.c_str(),
                    g.problem.empty() ? "" : " problem: ", g.problem.c_str());
    std::mutex mu;
    const bool watching = client->watch_violations(
        [&mu](dcgm::Event e) {
            std::lock_guard lock(mu);
            std::printf("violation at %lld us: %s\n", static_cast<long long>(e.ts_us), dcgm::format_line(e).c_str());
        },
        error);
    std::printf("watch_violations: %s%s\n", watching ? "ok" : "FAILED: ", watching ? "" : error.c_str());
    const auto incidents = client->health(error);
    if (!incidents)
        std::printf("health: FAILED: %s\n", error.c_str());
    else
        std::printf("health: %zu incidents%s%s\n", incidents->size(), error.empty() ? "" : "; ", error.c_str());
    for (const auto& i : incidents ? *incidents : std::vector<dcgm::Incident>{})
        std::printf("incident gpu %u %s (%s, %s): %s\n", i.gpu, i.code.c_str(), i.system.c_str(), i.health.c_str(),
                    i.message.c_str());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(listen_s));  // violations, if any, print meanwhile
    client->disconnect();
    return watching && incidents ? 0 : 1;
}
