#include "dcgm/client.hpp"

namespace jobtrail::dcgm {
namespace {

// Until the library loader lands (dcgm/library.cpp), every connection attempt says so: the
// source then reports DCGM as unavailable, exactly as on a node without libdcgm.
class Unavailable final : public Client {
public:
    bool connect(std::string& error) override {
        error = "this build has no DCGM library loader";
        return false;
    }
    std::string library() const override { return {}; }
    std::vector<Gpu> gpus(std::string& error) override {
        error = "not connected";
        return {};
    }
    bool watch_violations(std::function<void(Event)>, std::string& error) override {
        error = "not connected";
        return false;
    }
    std::optional<std::vector<Incident>> health(std::string& error) override {
        error = "not connected";
        return std::nullopt;
    }
    void disconnect() override {}
};

}  // namespace

std::unique_ptr<Client> make_client(const ClientOptions&) {
    return std::make_unique<Unavailable>();
}

}  // namespace jobtrail::dcgm
