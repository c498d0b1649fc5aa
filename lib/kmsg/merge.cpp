#include "kmsg/merge.hpp"

namespace jobtrail::kmsg {

void FragmentMerger::push(Record r, std::vector<Record>& out) {
    if (r.flag == '+' && pending_) {
        pending_->message += r.message;
        for (auto& kv : r.dict) pending_->dict.push_back(std::move(kv));
        return;
    }
    flush(out);
    if (r.flag == 'c') {
        pending_ = std::move(r);
        pending_->flag = '-';
        return;
    }
    r.flag = '-';
    out.push_back(std::move(r));
}

void FragmentMerger::flush(std::vector<Record>& out) {
    if (pending_) {
        out.push_back(std::move(*pending_));
        pending_.reset();
    }
}

}  // namespace jobtrail::kmsg
