// TieredStore: Redis in front of an object store (remote/tiered_store.hpp).
#include "remote/tiered_store.hpp"

namespace kiln::detail {

namespace {

class TieredStore final : public RemoteStore {
 public:
  TieredStore(std::unique_ptr<RemoteStore> redis, std::unique_ptr<RemoteStore> objects, std::chrono::milliseconds ttl)
      : redis_(std::move(redis)), objects_(std::move(objects)), ttl_(ttl) {}

  std::string where() const override { return redis_->where() + " + " + objects_->where(); }

  std::optional<std::string> get(const std::string& key) override {
    if (auto value = redis_->get(key)) return value;
    auto value = objects_->get(key);
    // Into Redis for the next machine; a refusal (a full Redis) only loses the copy.
    if (value) (void)redis_->put(key, *value, ttl_);
    return value;
  }

  bool contains(const std::string& key) override { return redis_->contains(key) || objects_->contains(key); }

  // The object store first: it is where entries last. Redis refusing is no refusal of the publish.
  RemoteReply put(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) override {
    RemoteReply reply = objects_->put(key, value, ttl);
    if (reply.kind == RemoteReply::done) (void)redis_->put(key, value, ttl);
    return reply;
  }

  RemoteReply put_over(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) override {
    RemoteReply reply = objects_->put_over(key, value, ttl);
    if (reply.kind == RemoteReply::done) (void)redis_->put_over(key, value, ttl);
    return reply;
  }

  RemoteReply try_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    return redis_->try_lease(key, token, ttl);
  }
  bool lease_held(const std::string& key, std::chrono::milliseconds ttl) override { return redis_->lease_held(key, ttl); }
  bool renew_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    return redis_->renew_lease(key, token, ttl);
  }
  void release_lease(const std::string& key, const std::string& token) override { redis_->release_lease(key, token); }

 private:
  std::unique_ptr<RemoteStore> redis_, objects_;
  const std::chrono::milliseconds ttl_;
};

}  // namespace

std::unique_ptr<RemoteStore> make_tiered_store(std::unique_ptr<RemoteStore> redis, std::unique_ptr<RemoteStore> objects,
                                               std::chrono::milliseconds ttl) {
  return std::make_unique<TieredStore>(std::move(redis), std::move(objects), ttl);
}

}  // namespace kiln::detail
