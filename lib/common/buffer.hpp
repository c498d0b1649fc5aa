#pragma once

#include <cstddef>
#include <cstring>
#include <memory>

namespace jobtrail {

// Bytes reused from use to use that are not zero-filled when they grow: every byte is written
// before it is read (a push body as snappy writes it, a spool run as its entries are added), and
// zero-filling was the largest single cost in callgrind's count.
class Buffer {
public:
    Buffer() = default;
    Buffer(Buffer&& o) noexcept : data_(std::move(o.data_)), cap_(o.cap_) { o.cap_ = 0; }
    Buffer& operator=(Buffer&& o) noexcept {
        data_ = std::move(o.data_);
        cap_ = o.cap_;
        o.cap_ = 0;
        return *this;
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    ~Buffer() = default;
    // What was in it is not kept. Grown by an eighth more than asked, so bodies a little bigger
    // each time do not allocate each time.
    char* reserve(size_t n) {
        if (cap_ < n) {
            const size_t cap = n + n / 8;
            data_.reset(new char[cap]);  // NOLINT(cppcoreguidelines-owning-memory): uninitialised on purpose
            cap_ = cap;
        }
        return data_.get();
    }
    // Grows to at least n keeping the first `keep` bytes.
    char* grow(size_t n, size_t keep) {
        if (cap_ < n) {
            Buffer b;
            b.reserve(n);
            if (keep) std::memcpy(b.data_.get(), data_.get(), keep);
            *this = std::move(b);
        }
        return data_.get();
    }
    void release() { *this = Buffer{}; }
    size_t capacity() const { return cap_; }
    char* data() { return data_.get(); }
    const char* data() const { return data_.get(); }

private:
    std::unique_ptr<char[]> data_;
    size_t cap_ = 0;
};

}  // namespace jobtrail
