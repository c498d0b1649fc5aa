#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <typeindex>
#include <vector>

// What the shipper exports on /metrics. A component declares each of its metrics once, with its
// Prometheus name and HELP text, and keeps the handle it gets back; render() walks what was
// declared. Handles live as long as the registry. Counting is a relaxed atomic add on a handle
// (no lookup, no lock); only the labelled families take a lock, once per labelled event.
namespace jobtrail::metrics {

using Labels = std::vector<std::string>;  // label values, in the order of the family's label names

// How a value is shown: as counted, or a nanosecond timestamp as whole seconds.
enum class Unit { kPlain, kNanosAsSeconds };

class Metric {
public:
    virtual ~Metric() = default;
    // The sample lines of `name` (no HELP/TYPE).
    virtual void write(const std::string& name, std::string& out) const = 0;
};

class Counter final : public Metric {
public:
    void add(uint64_t n = 1) { v_.fetch_add(n, std::memory_order_relaxed); }
    Counter& operator++() { return add(), *this; }
    Counter& operator+=(uint64_t n) { return add(n), *this; }
    uint64_t value() const { return v_.load(std::memory_order_relaxed); }
    operator uint64_t() const { return value(); }
    void write(const std::string& name, std::string& out) const override;

private:
    std::atomic<uint64_t> v_{0};
};

class Gauge final : public Metric {
public:
    explicit Gauge(Unit unit) : unit_(unit) {}
    void set(int64_t v) { v_.store(v, std::memory_order_relaxed); }
    Gauge& operator=(int64_t v) { return set(v), *this; }
    int64_t value() const { return v_.load(std::memory_order_relaxed); }
    operator int64_t() const { return value(); }
    void write(const std::string& name, std::string& out) const override;

private:
    const Unit unit_;
    std::atomic<int64_t> v_{0};
};

// A metric with labels whose values are known only as they come (a drop reason, a source).
template <class T>
class Family final : public Metric {
public:
    Family(std::vector<std::string> label_names, Unit unit) : names_(std::move(label_names)), unit_(unit) {}
    void add(const Labels& values, T n = 1) {
        std::lock_guard<std::mutex> lk(mu_);
        at(values) += n;
    }
    void set(const Labels& values, T v) {
        std::lock_guard<std::mutex> lk(mu_);
        at(values) = v;
    }
    // Keeps the largest value set (a newest timestamp).
    void raise(const Labels& values, T v) {
        std::lock_guard<std::mutex> lk(mu_);
        T& cur = at(values);
        if (v > cur) cur = v;
    }
    T value(const Labels& values) const {
        std::lock_guard<std::mutex> lk(mu_);
        const auto it = samples_.find(values);
        return it == samples_.end() ? T{} : it->second;
    }
    bool empty() const {
        std::lock_guard<std::mutex> lk(mu_);
        return samples_.empty();
    }
    std::map<Labels, T> samples() const {
        std::lock_guard<std::mutex> lk(mu_);
        return samples_;
    }
    void write(const std::string& name, std::string& out) const override;

private:
    // A value for each label name: a family's samples all carry the same labels.
    T& at(const Labels& values);
    const std::vector<std::string> names_;
    const Unit unit_;
    mutable std::mutex mu_;
    std::map<Labels, T> samples_;
};

using CounterFamily = Family<uint64_t>;
using GaugeFamily = Family<int64_t>;

class Registry {
public:
    Registry() = default;
    Registry(const Registry&) = delete;
    Registry& operator=(const Registry&) = delete;

    // Each throws std::invalid_argument for a name declared before or not a Prometheus name:
    // two components counting under one name would each see the other's counts.
    Counter& counter(const std::string& name, const std::string& help);
    Gauge& gauge(const std::string& name, const std::string& help, Unit unit = Unit::kPlain);
    CounterFamily& counters(const std::string& name, const std::string& help, std::vector<std::string> labels);
    GaugeFamily& gauges(const std::string& name, const std::string& help, std::vector<std::string> labels,
                        Unit unit = Unit::kPlain);
    // Run before each render, for values sampled rather than counted (a spool's size).
    void on_render(std::function<void()> sample);

    // The Prometheus text format (version 0.0.4), in the order of declaration.
    std::string render() const;

    // A component's metrics, G(registry) made on first use: the component's instances (a sender
    // per lane, a file source per section) share them.
    template <class G>
    G& group() {
        std::lock_guard<std::recursive_mutex> lk(groups_mu_);
        std::shared_ptr<void>& g = groups_[std::type_index(typeid(G))];
        if (!g) g = std::make_shared<G>(*this);
        return *static_cast<G*>(g.get());
    }

private:
    struct Entry {
        std::string name, help;
        const char* type;
        std::unique_ptr<Metric> metric;
    };
    Metric& add(const std::string& name, const std::string& help, const char* type, std::unique_ptr<Metric> m,
                const std::vector<std::string>& labels = {});

    mutable std::mutex mu_;  // entries_, samplers_; a render at a time
    std::vector<Entry> entries_;
    std::vector<std::function<void()>> samplers_;
    std::recursive_mutex groups_mu_;  // a group's constructor may ask for another group
    std::map<std::type_index, std::shared_ptr<void>> groups_;
};

}  // namespace jobtrail::metrics
