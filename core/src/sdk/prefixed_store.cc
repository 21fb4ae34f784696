// prefixed_store (zt/store.h): a Store that puts a prefix before every key of another.
#include <utility>

#include "zt/store.h"

namespace zt {

namespace {

class PrefixedStore final : public Store {
 public:
  PrefixedStore(std::shared_ptr<Store> store, std::string prefix)
      : store_(std::move(store)), prefix_(std::move(prefix)) {}
  void set(const std::string& key, const std::vector<uint8_t>& value) override {
    store_->set(prefix_ + key, value);
  }
  std::vector<uint8_t> get(const std::string& key, std::chrono::milliseconds timeout) override {
    return store_->get(prefix_ + key, timeout);
  }
  int64_t add(const std::string& key, int64_t delta) override {
    return store_->add(prefix_ + key, delta);
  }

 private:
  std::shared_ptr<Store> store_;
  std::string prefix_;
};

}  // namespace

std::unique_ptr<Store> prefixed_store(std::shared_ptr<Store> store, std::string prefix) {
  return std::make_unique<PrefixedStore>(std::move(store), std::move(prefix));
}

}  // namespace zt
