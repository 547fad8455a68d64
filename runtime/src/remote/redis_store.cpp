// RedisStore: the remote store on Redis. hiredis (Debian's libhiredis-dev) speaks the protocol; this file
// bounds every step of it in time, which hiredis's blocking calls do not do on their own.
#include "remote/redis_store.hpp"

#include "remote/sigpipe_blocked.hpp"

#include <kiln/error.hpp>

#include <arpa/inet.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

namespace kiln::detail {

namespace {

using Clock = std::chrono::steady_clock;

struct ContextFree {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};
using Context = std::unique_ptr<redisContext, ContextFree>;

struct ReplyFree {
  void operator()(redisReply* r) const noexcept { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

// What a reply may hold beyond a value of max_bytes: the protocol's framing, and the seal (48 bytes).
constexpr std::uint64_t kReplyOverhead = 4096;

// A lease is taken when nobody holds it, or when the one there would outlive the ttl asked for (no
// expiry, or a longer one): no holder sets such a lease, and waiting on it would stall every machine until
// wait_ms. Atomic, so that two takers never both win. 1: taken, 2: taken over, 0: held.
constexpr std::string_view kTakeLeaseScript =
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    "local left = redis.call('pttl', KEYS[1]) "
    "if left == -1 or left > tonumber(ARGV[2]) then redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2]) return 2 end "
    "return 0";
// Leases are renewed and released only by their holder, atomically: compare the token, then act.
constexpr std::string_view kRenewScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
constexpr std::string_view kReleaseScript =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

timeval to_timeval(std::chrono::milliseconds ms) {
  return timeval{static_cast<time_t>(ms.count() / 1000), static_cast<suseconds_t>(ms.count() % 1000 * 1000)};
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<std::int64_t>(left, 0, 1'000'000));
}

std::string ms_text(std::chrono::milliseconds ms) { return std::to_string(ms.count()) + " ms"; }

// Until `fd` is ready for `events`, or the deadline.
Status wait_for(int fd, short events, Clock::time_point deadline, std::chrono::milliseconds budget) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return ok();
    if (n == 0) return fail("no answer within " + ms_text(budget));
    if (errno != EINTR) return fail(std::string("poll: ") + std::strerror(errno));
  }
}

// A name lookup, bounded: getaddrinfo alone waits for the resolver's own timeouts (seconds, per server
// and attempt). What a lookup that outlives its wait still writes to is left to it.
Result<std::string> resolve(const std::string& host, unsigned port, std::chrono::milliseconds budget) {
  in_addr v4{};
  in6_addr v6{};
  if (::inet_pton(AF_INET, host.c_str(), &v4) == 1 || ::inet_pton(AF_INET6, host.c_str(), &v6) == 1) return host;
  struct Lookup {
    std::string name, service;
    addrinfo hints{};
    gaicb request{};
  };
  auto lookup = std::make_unique<Lookup>();
  lookup->name = host;
  lookup->service = std::to_string(port);
  lookup->hints.ai_family = AF_UNSPEC;
  lookup->hints.ai_socktype = SOCK_STREAM;
  lookup->request.ar_name = lookup->name.c_str();
  lookup->request.ar_service = lookup->service.c_str();
  lookup->request.ar_request = &lookup->hints;
  gaicb* list[] = {&lookup->request};
  if (::getaddrinfo_a(GAI_NOWAIT, list, 1, nullptr) != 0) return fail("cannot look up " + host);
  const auto deadline = Clock::now() + budget;
  int status = EAI_INPROGRESS;
  while ((status = ::gai_error(&lookup->request)) == EAI_INPROGRESS && Clock::now() < deadline) {
    const int left = ms_left(deadline);
    const timespec wait{left / 1000, static_cast<long>(left % 1000) * 1'000'000};
    ::gai_suspend(list, 1, &wait);
  }
  if (status == EAI_INPROGRESS) {
    if (::gai_cancel(&lookup->request) != EAI_CANCELED) (void)lookup.release();  // still being written
    return fail("no answer from the name service for " + host + " within " + ms_text(budget));
  }
  if (status != 0) return fail("cannot look up " + host + ": " + ::gai_strerror(status));
  char text[INET6_ADDRSTRLEN] = {};
  const addrinfo* first = lookup->request.ar_result;
  const int named = ::getnameinfo(first->ai_addr, first->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  ::freeaddrinfo(lookup->request.ar_result);
  if (named != 0) return fail("cannot look up " + host + ": " + ::gai_strerror(named));
  return std::string(text);
}

// The length a bulk string being read announces ("$<length>\r\n"), once that line has arrived: hiredis
// takes the type byte at once (its task's type), and the line only with the whole string.
std::optional<std::uint64_t> announced_bulk(const redisReader& r) {
  std::string_view rest(r.buf + r.pos, r.len - r.pos);
  const bool typed = r.ridx >= 0 && r.rstack[r.ridx].type == REDIS_REPLY_STRING;
  if (!typed) {
    if (!rest.starts_with('$')) return std::nullopt;
    rest.remove_prefix(1);
  }
  const auto eol = rest.find('\r');
  if (eol == std::string_view::npos || eol == 0) return std::nullopt;
  std::uint64_t length = 0;
  for (const char c : rest.substr(0, eol)) {
    if (c < '0' || c > '9') return std::nullopt;  // "-1" (nil), or not a length: the reader judges it
    length = std::min<std::uint64_t>(length * 10 + static_cast<std::uint64_t>(c - '0'), UINT64_MAX / 16);
  }
  return length;
}

// What one reply may make this process hold. hiredis builds an object of each element as it parses, and
// reserves an array's slots as soon as its header ("*<count>") arrives: the unparsed bytes in its buffer say
// nothing of that. So the slots of every array in a reply are counted against kMaxReplyElements before
// hiredis makes the array, and the bytes read for a reply against its byte limit, in exchange(). kiln's
// requests are answered with one value, never an array: the bound leaves room, and no more.
constexpr std::uint64_t kMaxReplyElements = 1024;

// The count of the reply being read, on this thread (hiredis calls the functions below from within
// redisGetReplyFromReader, on the thread of exchange()); null outside exchange().
struct ElementBudget {
  std::uint64_t left = kMaxReplyElements;
  std::uint64_t refused = 0;  // the count of the array refused, if one was
};
thread_local ElementBudget* reply_budget = nullptr;
const redisReplyObjectFunctions* hiredis_functions = nullptr;  // hiredis's own, which the counted ones call

// hiredis 0.14 gives an array's count as int, 1.x as size_t: the pointer's type picks the instance.
template <typename Count>
void* counted_array(const redisReadTask* task, Count count) {
  if (ElementBudget* budget = reply_budget; budget != nullptr) {
    const auto n = static_cast<std::uint64_t>(count);
    if (n > budget->left) {
      budget->refused = n;
      return nullptr;  // hiredis stops reading with an error; exchange() says why
    }
    budget->left -= n;
  }
  return hiredis_functions->createArray(task, count);
}

// Makes `c`'s reader count array slots. hiredis's functions are one static table, the same for every
// reader: the counting copy is made once, from the first.
void count_elements(redisContext* c) {
  static redisReplyObjectFunctions* const counted = [&] {
    hiredis_functions = c->reader->fn;
    auto* table = new redisReplyObjectFunctions(*c->reader->fn);  // lives for the process
    table->createArray = &counted_array;
    return table;
  }();
  if (c->reader->fn == hiredis_functions) c->reader->fn = counted;
}

// A reply refused for its size: nothing more of it is read, so the connection goes with it.
struct TooLarge {
  std::uint64_t announced = 0;  // the bulk string's length
};

// One request and its whole reply, by the deadline; no reply is read beyond `reply_limit` bytes (`too_large`
// then says how large a string it said it was) or kMaxReplyElements elements. A failure leaves the
// connection unusable.
Result<Reply> exchange(redisContext* c, const std::vector<std::string_view>& args, Clock::time_point deadline,
                       std::chrono::milliseconds budget, std::uint64_t reply_limit, std::optional<TooLarge>* too_large = nullptr) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;
  for (const std::string_view a : args) {
    argv.push_back(a.data());
    lengths.push_back(a.size());
  }
  if (redisAppendCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lengths.data()) != REDIS_OK)
    return fail(std::string("cannot format the request: ") + c->errstr);
  {
    const SigpipeBlocked no_sigpipe;
    for (int done = 0; !done;) {
      if (const Status ready = wait_for(c->fd, POLLOUT, deadline, budget); !ready)
        return fail("sending " + std::string(args.front()) + ": " + ready.error());
      if (redisBufferWrite(c, &done) != REDIS_OK)
        return fail("sending " + std::string(args.front()) + ": " + c->errstr);
    }
  }
  ElementBudget elements;
  reply_budget = &elements;
  struct Unset {
    ~Unset() { reply_budget = nullptr; }
  } unset;
  std::uint64_t received = 0;  // the reply's bytes read so far
  for (;;) {
    void* reply = nullptr;
    if (redisGetReplyFromReader(c, &reply) != REDIS_OK) {
      if (elements.refused != 0)
        return fail("the answer to " + std::string(args.front()) + " announces an array of " +
                    std::to_string(elements.refused) + " elements, more than a reply may hold (" +
                    std::to_string(kMaxReplyElements) + ")");
      return fail("the answer to " + std::string(args.front()) + " is not Redis's protocol (" + c->errstr + ")");
    }
    if (reply != nullptr) return Reply(static_cast<redisReply*>(reply));
    const auto announced = announced_bulk(*c->reader);
    if (announced && *announced > reply_limit) {
      if (too_large != nullptr) *too_large = TooLarge{*announced};
      return fail("the answer to " + std::string(args.front()) + " announces " + std::to_string(*announced) +
                  " bytes, more than " + std::to_string(reply_limit));
    }
    if (received > reply_limit)
      return fail("the answer to " + std::string(args.front()) + " is larger than " + std::to_string(reply_limit) + " bytes");
    // The whole answer by the deadline: poll() alone would let bytes that keep coming through after it.
    if (Clock::now() >= deadline)
      return fail("the answer to " + std::string(args.front()) + " did not end within " + ms_text(budget) +
                  " (" + std::to_string(received) + " bytes came)");
    if (const Status ready = wait_for(c->fd, POLLIN, deadline, budget); !ready)
      return fail("waiting for the answer to " + std::string(args.front()) + ": " + ready.error());
    // redisBufferRead appends what it read to the reader's buffer (it is compacted only while parsing).
    const std::size_t before = c->reader->len;
    if (redisBufferRead(c) != REDIS_OK)
      return fail("reading the answer to " + std::string(args.front()) + ": " + c->errstr);
    received += c->reader->len - before;
  }
}

std::string describe(const redisReply& r) {
  switch (r.type) {
    case REDIS_REPLY_STRING: return "a string of " + std::to_string(r.len) + " bytes";
    case REDIS_REPLY_ARRAY: return "an array";
    case REDIS_REPLY_INTEGER: return "the integer " + std::to_string(r.integer);
    case REDIS_REPLY_NIL: return "nil";
    case REDIS_REPLY_STATUS: return "status '" + std::string(r.str, r.len) + "'";
    case REDIS_REPLY_ERROR: return "error '" + std::string(r.str, r.len) + "'";
    default: return "a reply of type " + std::to_string(r.type);
  }
}

bool is_ok_status(const redisReply& r) { return r.type == REDIS_REPLY_STATUS && std::string_view(r.str, r.len) == "OK"; }

class RedisStore final : public RemoteStore {
 public:
  RedisStore(RedisAddress address, const RemoteSettings& settings)
      : address_(std::move(address)),
        connect_timeout_(settings.connect_timeout),
        request_timeout_(settings.request_timeout),
        max_value_bytes_(settings.max_value_bytes),
        reply_limit_(settings.max_value_bytes + kReplyOverhead) {}

  std::string where() const override { return address_.where(); }

  std::optional<std::string> get(const std::string& key) override {
    std::optional<TooLarge> too_large;
    const Reply r = call({"GET", key}, &too_large);
    if (too_large)
      throw RemoteBadValue("its value is " + std::to_string(too_large->announced) +
                           " bytes, larger than this machine's max_bytes (" + std::to_string(max_value_bytes_) +
                           " in KILN_REMOTE_CACHE), and was not read");
    if (r->type == REDIS_REPLY_NIL) return std::nullopt;
    if (r->type == REDIS_REPLY_STRING) return std::string(r->str, r->len);
    if (r->type == REDIS_REPLY_ERROR && std::string_view(r->str, r->len).starts_with("WRONGTYPE"))
      throw RemoteBadValue("it is not a string but another type of Redis value (" + describe(*r) + ")");
    throw unexpected("GET", *r);
  }

  bool contains(const std::string& key) override {
    const Reply r = call({"EXISTS", key});
    if (r->type == REDIS_REPLY_INTEGER) return r->integer > 0;
    throw unexpected("EXISTS", *r);
  }

  RemoteReply put(const std::string& key, std::string_view value, std::chrono::milliseconds ttl) override {
    const Reply r = call({"SET", key, value, "PX", std::to_string(ttl.count())});
    if (is_ok_status(*r)) return {};
    if (r->type == REDIS_REPLY_ERROR) return {RemoteReply::refused, std::string(r->str, r->len)};
    throw unexpected("SET", *r);
  }

  RemoteReply try_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    const Reply r = call({"EVAL", kTakeLeaseScript, "1", key, token, std::to_string(ttl.count())});
    if (r->type == REDIS_REPLY_INTEGER && r->integer > 0) return {};
    if (r->type == REDIS_REPLY_INTEGER) return {RemoteReply::held, {}};
    if (r->type == REDIS_REPLY_ERROR) return {RemoteReply::refused, std::string(r->str, r->len)};
    throw unexpected("EVAL of the lease", *r);
  }

  bool lease_held(const std::string& key, std::chrono::milliseconds ttl) override {
    const Reply r = call({"PTTL", key});
    if (r->type == REDIS_REPLY_INTEGER) return r->integer >= 0 && r->integer <= ttl.count();
    throw unexpected("PTTL", *r);
  }

  bool renew_lease(const std::string& key, const std::string& token, std::chrono::milliseconds ttl) override {
    const Reply r = call({"EVAL", kRenewScript, "1", key, token, std::to_string(ttl.count())});
    return r->type == REDIS_REPLY_INTEGER && r->integer == 1;
  }

  void release_lease(const std::string& key, const std::string& token) override {
    call({"EVAL", kReleaseScript, "1", key, token});  // an error reply: the lease expires by itself
  }

 private:
  // What went wrong; the remote tier's warning or push()'s error names the server around it.
  static Error unexpected(std::string_view command, const redisReply& r) {
    return Error(Errc::remote, "it answered " + std::string(command) + " with " + describe(r) +
                                   " (is it a Redis server, and the one meant?)");
  }

  static Error failure(const std::string& why) { return Error(Errc::remote, why); }

  // A server that wants a password, or another one, answers every command so: a failure of the store
  // (nothing works without it), never a refusal to write (which says what a full server needs).
  void check_authorised(const redisReply& r) const {
    if (r.type != REDIS_REPLY_ERROR) return;
    const std::string_view text(r.str, r.len);
    if (!text.starts_with("NOAUTH") && !text.starts_with("WRONGPASS") && !text.starts_with("NOPERM")) return;
    throw failure("the server refuses kiln's requests (" + std::string(text) + "): " +
                  (address_.password.empty()
                       ? "it needs a password: give it in KILN_REMOTE_CACHE as redis://:PASSWORD@host (or "
                         "redis://USER:PASSWORD@host for an ACL user)"
                       : "check the user and password in KILN_REMOTE_CACHE, and that the user may GET, SET, EVAL and "
                         "PTTL kiln:* keys"));
  }

  // The reply to one request on a connection of this thread's own; throws Error(remote) when there is none.
  // A reply refused for its size only, when `too_large` is given: then nothing (the connection goes too).
  Reply call(std::vector<std::string_view> args, std::optional<TooLarge>* too_large = nullptr) {
    Context c = take();
    Result<Reply> reply = exchange(c.get(), args, Clock::now() + request_timeout_, request_timeout_, reply_limit_, too_large);
    if (!reply && too_large != nullptr && *too_large) return nullptr;
    if (!reply) throw failure(reply.error());  // the connection goes with it: its stream is out of step
    give_back(std::move(c));
    check_authorised(**reply);
    return std::move(reply).value();
  }

  Context take() {
    {
      const std::lock_guard lock(mutex_);
      // A forked child must not talk on its parent's connections: their replies would interleave.
      if (owner_ != ::getpid()) {
        idle_.clear();
        owner_ = ::getpid();
      }
      if (!idle_.empty()) {
        Context c = std::move(idle_.back());
        idle_.pop_back();
        return c;
      }
    }
    return connect();
  }

  void give_back(Context c) {
    const std::lock_guard lock(mutex_);
    if (owner_ == ::getpid() && idle_.size() < kMaxIdle) idle_.push_back(std::move(c));
  }

  Context connect() {
    const auto start = Clock::now();
    const Result<std::string> ip = resolve(address_.host, address_.port, connect_timeout_);
    if (!ip) throw failure(ip.error());
    const auto left = std::max(std::chrono::milliseconds(1),
                               connect_timeout_ - std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start));
    Context c(redisConnectWithTimeout(ip->c_str(), static_cast<int>(address_.port), to_timeval(left)));
    if (!c) throw failure("cannot allocate a connection");
    if (c->err != 0) throw failure(std::string("cannot connect within ") + ms_text(connect_timeout_) + ": " + c->errstr);
    count_elements(c.get());
    // A backstop for hiredis's own blocking writes and reads; exchange() bounds the whole request.
    redisSetTimeout(c.get(), to_timeval(request_timeout_));
    const auto setup = [&](std::vector<std::string_view> args, std::string_view what) {
      Result<Reply> r = exchange(c.get(), args, Clock::now() + request_timeout_, request_timeout_, 4096);
      if (!r) throw failure(r.error());
      if (!is_ok_status(**r)) throw failure(std::string(what) + " was answered with " + describe(**r));
    };
    if (!address_.password.empty()) {
      if (address_.user.empty()) setup({"AUTH", address_.password}, "AUTH (check the password in KILN_REMOTE_CACHE)");
      else setup({"AUTH", address_.user, address_.password}, "AUTH (check the user and password in KILN_REMOTE_CACHE)");
    }
    if (address_.db != 0) setup({"SELECT", std::to_string(address_.db)}, "SELECT of the URL's database");
    return c;
  }

  static constexpr std::size_t kMaxIdle = 16;

  const RedisAddress address_;
  const std::chrono::milliseconds connect_timeout_;
  const std::chrono::milliseconds request_timeout_;
  const std::uint64_t max_value_bytes_;
  const std::uint64_t reply_limit_;
  std::mutex mutex_;
  pid_t owner_ = ::getpid();
  std::vector<Context> idle_;
};

}  // namespace

std::unique_ptr<RemoteStore> make_redis_store(RedisAddress address, const RemoteSettings& settings) {
  return std::make_unique<RedisStore>(std::move(address), settings);
}

}  // namespace kiln::detail
