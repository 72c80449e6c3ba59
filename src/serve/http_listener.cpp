#include "serve/http_listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace splitdec::serve {

namespace {

using Clock = std::chrono::steady_clock;

// Past this many pending connects the kernel refuses new ones; 5 (the
// common default) lost a quarter of a 64-connection burst.
constexpr int kListenBacklog = 512;
// A refused request's unread body is drained this long before the close, so
// the refusal is not lost to a reset.
constexpr auto kLingerTime = std::chrono::milliseconds(2000);

std::string seconds(std::chrono::milliseconds ms) {
  return std::to_string(ms.count() / 1000) + (ms.count() % 1000 ? "." + std::to_string(ms.count() % 1000 / 100) : "") + " s";
}

void set_blocking(int fd, bool blocking) {
  const int flags = ::fcntl(fd, F_GETFL, 0);
  ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

std::string peer_of(const sockaddr_storage& a) {
  char host[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (a.ss_family == AF_INET) {
    const auto& v4 = reinterpret_cast<const sockaddr_in&>(a);
    ::inet_ntop(AF_INET, &v4.sin_addr, host, sizeof host);
    port = ntohs(v4.sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto& v6 = reinterpret_cast<const sockaddr_in6&>(a);
    ::inet_ntop(AF_INET6, &v6.sin6_addr, host, sizeof host);
    port = ntohs(v6.sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

// Sends everything or fails; a blocking socket's SO_SNDTIMEO bounds each wait.
bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(size_t(n));
  }
  return true;
}

class SocketStream : public ResponseStream {
 public:
  explicit SocketStream(int fd) : fd_(fd) {}
  bool write(std::string_view data) override {
    if (ok_ && !data.empty()) ok_ = send_all(fd_, chunk(data));
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  bool ok_ = true;
};

}  // namespace

struct HttpListener::Impl {
  struct Connection {
    int fd = -1;
    std::string peer;
    std::string in;  // received and not yet consumed
    enum class Phase { Head, Body, WaitBudget, Linger } phase = Phase::Head;
    Clock::time_point deadline;
    RequestHead head;     // from Body on
    size_t reserved = 0;  // body budget held
    bool idle = false;    // kept alive after a response, waiting for the next request (idle_timeout)
  };
  using ConnectionPtr = std::unique_ptr<Connection>;

  HttpLimits limits;
  size_t handler_threads;
  HeadCheck check;
  Handler handler;
  Observer observer;
  ErrorForm error_response;

  int listen_fd = -1, epoll_fd = -1, wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::atomic<size_t> open{0};  // connections accepted and not closed

  // Gate thread only.
  std::unordered_map<int, ConnectionPtr> gate;
  std::deque<int> budget_waiters;

  std::mutex m;
  std::condition_variable work_cv;
  std::deque<ConnectionPtr> ready;        // whole requests for the handlers
  std::vector<ConnectionPtr> returned;    // kept-alive connections back to the gate
  size_t inflight = 0;                    // body bytes reserved
  bool handlers_stop = false;
  std::vector<std::thread> handlers;

  Impl(HttpLimits l, size_t threads, Callbacks cb)
      : limits(l), handler_threads(std::max<size_t>(threads, 1)), check(std::move(cb.check)), handler(std::move(cb.handle)),
        observer(std::move(cb.observe)), error_response(std::move(cb.error)) {
    if (!error_response)
      error_response = [](int status, const std::string& message) {
        HttpResponse r;
        r.status = status;
        r.content_type = "text/plain";
        r.body = message + "\n";
        return r;
      };
    // One request whose body is as large as allowed must always fit.
    limits.max_inflight_body_bytes = std::max(limits.max_inflight_body_bytes, limits.max_body_bytes);
    epoll_fd = ::epoll_create1(EPOLL_CLOEXEC);
    wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (epoll_fd < 0 || wake_fd < 0) throw Error(std::string("cannot create the server's event loop: ") + std::strerror(errno));
    watch(wake_fd, EPOLLIN, EPOLL_CTL_ADD);
  }

  ~Impl() {
    for (int fd : {listen_fd, epoll_fd, wake_fd})
      if (fd >= 0) ::close(fd);
  }

  void watch(int fd, uint32_t events, int op) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    ::epoll_ctl(epoll_fd, op, fd, &ev);
  }

  void wake() {
    const uint64_t one = 1;
    [[maybe_unused]] const ssize_t n = ::write(wake_fd, &one, sizeof one);
  }

  void close_connection(ConnectionPtr c) {
    if (c->reserved) release(*c);
    ::close(c->fd);
    --open;
  }

  void release(Connection& c) {
    {
      std::lock_guard<std::mutex> lock(m);
      inflight -= c.reserved;
    }
    c.reserved = 0;
    wake();  // a request may be waiting for this budget
  }

  // --- The gate: accept, read heads and bodies, refuse, time out. ---

  void accept_all() {
    for (;;) {
      sockaddr_storage addr{};
      socklen_t len = sizeof addr;
      const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) return;  // EAGAIN, or out of descriptors: the backlog keeps them for later
      if (open.load() >= limits.max_connections) {
        ::close(fd);
        continue;
      }
      ++open;
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      auto c = std::make_unique<Connection>();
      c->fd = fd;
      c->peer = peer_of(addr);
      c->deadline = Clock::now() + limits.head_timeout;
      watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      gate.emplace(fd, std::move(c));
    }
  }

  // Takes `c` out of the gate for good.
  ConnectionPtr detach(int fd) {
    auto it = gate.find(fd);
    ConnectionPtr c = std::move(it->second);
    gate.erase(it);
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, fd, nullptr);
    return c;
  }

  // Sends a short answer from the gate thread (it fits the socket's buffer),
  // then drains what the client still sends, so the answer is read before the close.
  void refuse(Connection& c, const HttpResponse& r) {
    const std::string bytes = response_head(r, static_cast<long long>(r.body.size()), false) + r.body;
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = ::send(c.fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n <= 0) break;
      done += size_t(n);
    }
    if (observer) observer(r.status);
    if (c.reserved) release(c);
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Connection::Phase::Linger;
    c.in.clear();
    c.deadline = Clock::now() + kLingerTime;
    watch(c.fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
  }

  void refuse(Connection& c, int status, const std::string& message) { refuse(c, error_response(status, message)); }

  void on_event(int fd, uint32_t events) {
    Connection& c = *gate.at(fd);
    if (c.phase == Connection::Phase::WaitBudget) {
      // Not reading while it waits; only a close matters.
      if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) drop_waiter(fd);
      return;
    }
    char buf[16384];
    for (;;) {
      // Never more than the phase needs: a head one byte past its limit, a body to its length.
      size_t need = sizeof buf;
      if (c.phase == Connection::Phase::Head) need = limits.max_head_bytes + 1;
      else if (c.phase == Connection::Phase::Body) need = c.head.head_bytes + c.head.body_bytes;
      const size_t want = c.phase == Connection::Phase::Linger ? sizeof buf
                          : c.in.size() >= need                ? 0
                                                               : std::min(sizeof buf, need - c.in.size());
      if (want == 0) break;
      const ssize_t n = ::recv(fd, buf, want, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        close_connection(detach(fd));
        return;
      }
      if (n == 0) {  // the client closed its side: nothing can be answered
        close_connection(detach(fd));
        return;
      }
      if (c.phase != Connection::Phase::Linger) c.in.append(buf, size_t(n));
    }
    if (c.idle && !c.in.empty()) {  // a kept-alive connection starts its next request: the head's clock starts now
      c.idle = false;
      c.deadline = Clock::now() + limits.head_timeout;
    }
    advance(fd);
  }

  // Moves a connection on with what it has received.
  void advance(int fd) {
    Connection& c = *gate.at(fd);
    if (c.phase == Connection::Phase::Head) {
      RequestHead head = read_request_head(c.in, limits);
      if (head.state == RequestHead::State::NeedMore) return;
      if (head.state == RequestHead::State::Refused) return refuse(c, head.status, head.reason);
      head.request.peer = c.peer;
      if (check) {
        if (std::optional<HttpResponse> r = check(head.request)) return refuse(c, *r);
      }
      c.head = std::move(head);
      if (c.head.body_bytes > 0) {
        c.phase = Connection::Phase::WaitBudget;
        c.deadline = Clock::now() + limits.body_timeout;
        watch(fd, EPOLLRDHUP, EPOLL_CTL_MOD);
        budget_waiters.push_back(fd);
        admit_waiters();
        return;
      }
      c.phase = Connection::Phase::Body;
    }
    if (c.phase == Connection::Phase::Body && c.in.size() >= c.head.head_bytes + c.head.body_bytes) dispatch(fd);
  }

  // Gives body budget to waiting requests, first come first served.
  void admit_waiters() {
    while (!budget_waiters.empty()) {
      const int fd = budget_waiters.front();
      Connection& c = *gate.at(fd);
      {
        std::lock_guard<std::mutex> lock(m);
        if (inflight + c.head.body_bytes > limits.max_inflight_body_bytes) return;
        inflight += c.head.body_bytes;
      }
      budget_waiters.pop_front();
      c.reserved = c.head.body_bytes;
      c.phase = Connection::Phase::Body;
      c.deadline = Clock::now() + limits.body_timeout;
      watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_MOD);
      if (c.head.expect_continue && c.in.size() < c.head.head_bytes + c.head.body_bytes) {
        static const std::string go_on = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] const ssize_t n = ::send(fd, go_on.data(), go_on.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      }
      advance(fd);
    }
  }

  void drop_waiter(int fd) {
    budget_waiters.erase(std::find(budget_waiters.begin(), budget_waiters.end(), fd));
    close_connection(detach(fd));
  }

  void dispatch(int fd) {
    ConnectionPtr c = detach(fd);
    const size_t end = c->head.head_bytes + c->head.body_bytes;
    c->head.request.body = c->in.substr(c->head.head_bytes, c->head.body_bytes);
    c->in.erase(0, end);  // a pipelined next request stays
    {
      std::lock_guard<std::mutex> lock(m);
      ready.push_back(std::move(c));
    }
    work_cv.notify_one();
  }

  void expire() {
    const auto now = Clock::now();
    std::vector<int> due;
    for (const auto& [fd, c] : gate)
      if (c->deadline <= now) due.push_back(fd);
    for (int fd : due) {
      Connection& c = *gate.at(fd);
      switch (c.phase) {
        case Connection::Phase::Head:
          if (c.in.empty()) close_connection(detach(fd));  // idle: nothing was asked
          else refuse(c, 408, "the request head did not arrive within " + seconds(limits.head_timeout) + " (--header-timeout)");
          break;
        case Connection::Phase::Body:
          refuse(c, 408, "the request body did not arrive within " + seconds(limits.body_timeout) + " (--body-timeout)");
          break;
        case Connection::Phase::WaitBudget: {
          budget_waiters.erase(std::find(budget_waiters.begin(), budget_waiters.end(), fd));
          HttpResponse r = error_response(503, "the server is reading other requests' bodies (" +
                                                   std::to_string(limits.max_inflight_body_bytes) +
                                                   " bytes in flight at most); retry later");
          r.headers.emplace_back("Retry-After", "1");
          refuse(c, r);
          break;
        }
        case Connection::Phase::Linger: close_connection(detach(fd)); break;
      }
    }
  }

  void take_returned() {
    std::vector<ConnectionPtr> back;
    {
      std::lock_guard<std::mutex> lock(m);
      back.swap(returned);
    }
    for (ConnectionPtr& c : back) {
      const int fd = c->fd;
      watch(fd, EPOLLIN | EPOLLRDHUP, EPOLL_CTL_ADD);
      gate.emplace(fd, std::move(c));
      advance(fd);  // a pipelined request may be whole already
    }
  }

  void run_gate() {
    epoll_event events[64];
    while (!stopping.load()) {
      const int n = ::epoll_wait(epoll_fd, events, 64, 100);
      for (int i = 0; i < n && !stopping.load(); ++i) {
        const int fd = events[i].data.fd;
        if (fd == listen_fd) accept_all();
        else if (fd == wake_fd) {
          uint64_t count;
          [[maybe_unused]] const ssize_t r = ::read(wake_fd, &count, sizeof count);
          take_returned();
          admit_waiters();
        } else if (gate.count(fd)) on_event(fd, events[i].events);
      }
      expire();
    }
    ::epoll_ctl(epoll_fd, EPOLL_CTL_DEL, listen_fd, nullptr);
    ::close(listen_fd);
    listen_fd = -1;
    budget_waiters.clear();
    while (!gate.empty()) close_connection(detach(gate.begin()->first));
  }

  // --- The handlers: whole requests in, responses out. ---

  void run_handler() {
    for (;;) {
      ConnectionPtr c;
      {
        std::unique_lock<std::mutex> lock(m);
        work_cv.wait(lock, [&] { return !ready.empty() || handlers_stop; });
        if (ready.empty()) return;
        c = std::move(ready.front());
        ready.pop_front();
      }
      serve(std::move(c));
    }
  }

  void serve(ConnectionPtr c) {
    const int fd = c->fd;
    set_blocking(fd, true);
    const timeval tv{static_cast<time_t>(limits.write_timeout.count() / 1000),
                     static_cast<suseconds_t>(limits.write_timeout.count() % 1000 * 1000)};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    HttpRequest& req = c->head.request;
    req.client_gone = [fd] {
      pollfd p{fd, POLLRDHUP, 0};
      return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
    };
    bool ok = true;
    int status = 500;
    {
      HttpResponse res;
      try {
        res = handler(req);
      } catch (const std::exception& e) {
        res = error_response(500, std::string("internal error: ") + e.what());
      } catch (...) {
        res = error_response(500, "internal error");
      }
      status = res.status;
      const bool keep = req.keep_alive && !stopping.load();
      if (!res.stream) {
        ok = send_all(fd, response_head(res, static_cast<long long>(res.body.size()), keep) + res.body);
      } else {
        SocketStream out(fd);
        ok = send_all(fd, response_head(res, -1, keep));
        if (ok) res.stream(out);
        ok = ok && out.ok() && send_all(fd, chunk(""));
      }
      ok = ok && keep;
    }  // the response (and what its stream holds) is gone before the connection goes on
    if (observer) observer(status);
    req.client_gone = nullptr;
    if (c->reserved) release(*c);
    if (!ok || stopping.load()) return close_connection(std::move(c));
    set_blocking(fd, false);
    c->phase = Connection::Phase::Head;
    c->head = {};
    c->idle = c->in.empty();
    c->deadline = Clock::now() + (c->idle ? limits.idle_timeout : limits.head_timeout);
    {
      std::lock_guard<std::mutex> lock(m);
      returned.push_back(std::move(c));
    }
    wake();
  }
};

HttpListener::HttpListener(HttpLimits limits, size_t handler_threads, Callbacks callbacks)
    : impl_(std::make_unique<Impl>(limits, handler_threads, std::move(callbacks))) {}

HttpListener::~HttpListener() = default;

int HttpListener::bind(const std::string& host, int port) {
  if (port < 0 || port > 65535) throw InputError("--port " + std::to_string(port) + " is not a TCP port (0-65535; 0 picks a free one)");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw InputError("--host " + host + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> keep(found, ::freeaddrinfo);
  const std::string where = host + ":" + std::to_string(port);
  const int fd = ::socket(found->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) throw Error("cannot create a socket for " + where + ": " + std::strerror(errno));
  // SO_REUSEADDR lets a restarted server bind past its old connections'
  // TIME_WAIT; without SO_REUSEPORT a second server on the port fails here.
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, kListenBacklog) != 0) {
    const int err = errno;
    ::close(fd);
    throw InputError("cannot listen on " + where + ": " +
                     (err == EADDRINUSE ? std::string("the port is in use") : std::string(std::strerror(err))));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  impl_->listen_fd = fd;
  impl_->watch(fd, EPOLLIN, EPOLL_CTL_ADD);
  return bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(bound).sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in&>(bound).sin_port);
}

void HttpListener::run() {
  Impl& s = *impl_;
  if (s.listen_fd < 0) throw Error("HttpListener::run before bind");
  for (size_t i = 0; i < s.handler_threads; ++i) s.handlers.emplace_back([&s] { s.run_handler(); });
  s.run_gate();
  {
    std::lock_guard<std::mutex> lock(s.m);
    s.handlers_stop = true;
  }
  s.work_cv.notify_all();
  for (std::thread& t : s.handlers) t.join();
  s.handlers.clear();
  for (auto& c : s.returned) s.close_connection(std::move(c));
  s.returned.clear();
}

void HttpListener::stop() {
  impl_->stopping = true;
  impl_->wake();
}

}  // namespace splitdec::serve
