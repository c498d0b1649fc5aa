#include "shipper/metrics/registry.hpp"

#include <stdexcept>
#include <type_traits>

namespace jobtrail::metrics {

namespace {

bool valid_name(const std::string& s, bool colon) {
    if (s.empty() || (s[0] >= '0' && s[0] <= '9')) return false;
    for (const char c : s)
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
              (colon && c == ':')))
            return false;
    return true;
}

std::string shown(int64_t v, Unit unit) {
    return std::to_string(unit == Unit::kNanosAsSeconds ? v / 1'000'000'000 : v);
}

// A label value as the text format quotes it.
void append_quoted(std::string& out, const std::string& v) {
    for (const char c : v) {
        if (c == '\\' || c == '"')
            out += '\\', out += c;
        else if (c == '\n')
            out += "\\n";
        else
            out += c;
    }
}

}  // namespace

void Counter::write(const std::string& name, std::string& out) const {
    out += name + " " + std::to_string(value()) + "\n";
}

void Gauge::write(const std::string& name, std::string& out) const {
    out += name + " " + shown(value(), unit_) + "\n";
}

template <class T>
T& Family<T>::at(const Labels& values) {
    if (values.size() != names_.size())
        throw std::invalid_argument("metric sample with " + std::to_string(values.size()) + " label values for " +
                                    std::to_string(names_.size()) + " label names");
    return samples_[values];
}

template <class T>
void Family<T>::write(const std::string& name, std::string& out) const {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [values, v] : samples_) {
        out += name + "{";
        for (size_t i = 0; i < names_.size(); ++i) {
            out += (i ? "," : "") + names_[i] + "=\"";
            append_quoted(out, values[i]);
            out += "\"";
        }
        out += "} " + (std::is_signed_v<T> ? shown(static_cast<int64_t>(v), unit_) : std::to_string(v)) + "\n";
    }
}

template class Family<uint64_t>;
template class Family<int64_t>;

Metric& Registry::add(const std::string& name, const std::string& help, const char* type, std::unique_ptr<Metric> m,
                      const std::vector<std::string>& labels) {
    if (!valid_name(name, true)) throw std::invalid_argument("metric name '" + name + "' is not a Prometheus name");
    for (const auto& l : labels)
        if (!valid_name(l, false) || l.rfind("__", 0) == 0)
            throw std::invalid_argument("metric " + name + ": label name '" + l + "' is not a Prometheus label name");
    if (help.find('\n') != std::string::npos) throw std::invalid_argument("metric " + name + ": HELP text spans lines");
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& e : entries_)
        if (e.name == name) throw std::invalid_argument("metric " + name + " is declared twice");
    entries_.push_back({name, help, type, std::move(m)});
    return *entries_.back().metric;
}

Counter& Registry::counter(const std::string& name, const std::string& help) {
    return static_cast<Counter&>(add(name, help, "counter", std::make_unique<Counter>()));
}

Gauge& Registry::gauge(const std::string& name, const std::string& help, Unit unit) {
    return static_cast<Gauge&>(add(name, help, "gauge", std::make_unique<Gauge>(unit)));
}

CounterFamily& Registry::counters(const std::string& name, const std::string& help, std::vector<std::string> labels) {
    auto f = std::make_unique<CounterFamily>(labels, Unit::kPlain);
    return static_cast<CounterFamily&>(add(name, help, "counter", std::move(f), labels));
}

GaugeFamily& Registry::gauges(const std::string& name, const std::string& help, std::vector<std::string> labels,
                              Unit unit) {
    auto f = std::make_unique<GaugeFamily>(labels, unit);
    return static_cast<GaugeFamily&>(add(name, help, "gauge", std::move(f), labels));
}

void Registry::on_render(std::function<void()> sample) {
    std::lock_guard<std::mutex> lk(mu_);
    samplers_.push_back(std::move(sample));
}

std::string Registry::render() const {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& s : samplers_) s();
    std::string out;
    for (const auto& e : entries_) {
        out += "# HELP " + e.name + " " + e.help + "\n# TYPE " + e.name + " " + e.type + "\n";
        e.metric->write(e.name, out);
    }
    return out;
}

}  // namespace jobtrail::metrics
