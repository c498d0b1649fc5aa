#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "dcgm/event.hpp"

// The shipper's view of a node's DCGM host engine (nv-hostengine), through NVIDIA's libdcgm loaded
// at run time (dcgm/library.cpp: no build-time dependency on DCGM). One implementation talks to
// the real library (make_client); tests of the source substitute their own.
namespace jobtrail::dcgm {

struct ClientOptions {
    // The host engine: "" for the local default (127.0.0.1:5555), "host:port", or "unix:/path"
    // for its unix socket.
    std::string address;
    // The libraries tried in order with dlopen (DCGM 4.x, then 3.x); a name with a '/' is a path.
    std::vector<std::string> libraries = {"libdcgm.so.4", "libdcgm.so.3"};
    // The longest any one DCGM call may take; a call past it is abandoned (its thread left to
    // finish) and the connection is treated as lost.
    int call_timeout_ms = 5000;
};

struct Gpu {
    unsigned id = 0;
    std::string pci_bdf;  // as DCGM gives it, "00000000:3B:00.0"; empty when `problem` says why
    std::string problem;  // why DCGM could not describe this GPU (one that fell off the bus)
};

// A health incident as dcgmHealthCheck lists it (without the time: the check's).
struct Incident {
    unsigned gpu = 0;
    std::string code;     // DCGM_FR_* name
    std::string system;   // pcie, nvlink, pmu, mcu, mem, sm, inforom, thermal, power, driver, nvswitch, connectx, all
    std::string health;   // warn, fail
    std::string message;  // DCGM's text
};

class Client {
public:
    virtual ~Client() = default;
    // Loads the library (once) and connects to the host engine. False with `error` saying which
    // library or address failed and how ("libdcgm.so.4, libdcgm.so.3: not found").
    virtual bool connect(std::string& error) = 0;
    // The library in use and its API facts, for the shipper's notice ("libdcgm.so.4").
    virtual std::string library() const = 0;
    virtual std::vector<Gpu> gpus(std::string& error) = 0;
    // Registers for every policy violation (XID, DBE, PCIe, retired pages, thermal, power, NVLink)
    // on all GPUs. `sink` is called on DCGM's own thread with each violation as an Event and must
    // not block. False with `error` when DCGM refused.
    virtual bool watch_violations(std::function<void(Event)> sink, std::string& error) = 0;
    // Runs the health checks (all systems, set up on the first call); nullopt with `error` when the
    // call failed or timed out (the connection is then treated as lost).
    virtual std::optional<std::vector<Incident>> health(std::string& error) = 0;
    // Unregisters and disconnects; safe to call twice, and after a lost connection.
    virtual void disconnect() = 0;
};

std::unique_ptr<Client> make_client(const ClientOptions& options);

}  // namespace jobtrail::dcgm
