#include "serve_test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "api/api_internal.h"
#include "core/npy.h"
#include "test_support.h"

namespace splitdec::test {

TestServer::TestServer(const TestServerOptions& o) {
  engine_ = Engine::load(o.model_dir.empty() ? tiny_model_dir(o.preset) : o.model_dir);
  ConversationOptions co;
  co.plan = parse_execution_plan(o.plan);
  co.max_length = o.max_length;
  serve::SchedulerOptions so;
  so.session = api::session_options(co, o.max_sequences);
  so.max_sequences = o.max_sequences;
  so.max_queue = o.max_queue;
  so.prefill_budget = o.prefill_budget;
  so.prefix_cache = o.prefix_cache;
  serve::ServerOptions sv;
  sv.host = "127.0.0.1";
  sv.port = 0;
  sv.api_key = o.api_key;
  sv.media_dir = o.media_dir;
  sv.model_name = "tiny";
  sv.limits = o.limits;
  sv.limits.max_body_bytes = o.max_body_bytes;
  sv.image = o.image;
  sv.media_cache_bytes = o.media_cache_bytes;
  server_ = std::make_unique<serve::HttpServer>(engine_, sv, so);
  port_ = server_->bind();
  thread_ = std::thread([this] { server_->serve(); });
}

TestServer::~TestServer() {
  server_->shutdown();
  thread_.join();
}

httplib::Client TestServer::client() const {
  httplib::Client c("127.0.0.1", port_);
  c.set_read_timeout(120, 0);
  return c;
}

RawConnection::RawConnection(int port) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(uint16_t(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd_ < 0 || ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) throw std::runtime_error("connect failed");
}

RawConnection::~RawConnection() { close(); }

void RawConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void RawConnection::send_all(const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the server may close early (413): the test reads its answer
    done += size_t(n);
  }
}

std::string RawConnection::read_some(int timeout_ms, size_t max_bytes) {
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return {};
  std::string buf(max_bytes, '\0');
  const ssize_t n = ::recv(fd_, buf.data(), buf.size(), 0);
  buf.resize(n > 0 ? size_t(n) : 0);
  return buf;
}

std::string RawConnection::read_until(const std::string& needle, int timeout_ms) {
  std::string all;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (all.find(needle) == std::string::npos && std::chrono::steady_clock::now() < end) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) break;
    all.append(buf, size_t(n));
  }
  return all;
}

std::string RawConnection::read_until_events(int events, int timeout_ms) {
  std::string all;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto count = [&] {
    int n = 0;
    for (size_t at = all.find("data: "); at != std::string::npos; at = all.find("data: ", at + 1)) ++n;
    return n;
  };
  while (count() < events && std::chrono::steady_clock::now() < end) {
    const std::string more = read_some(100);
    if (more.empty()) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 0) > 0) break;  // readable and empty: the connection ended
      continue;
    }
    all += more;
  }
  return all;
}

std::string post_request(const std::string& path, const std::string& body, const std::string& extra_headers) {
  return "POST " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

std::string base64_encode(const std::string& bytes) {
  static const char* a = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t v = uint32_t(uint8_t(bytes[i])) << 16 | uint32_t(uint8_t(bytes[i + 1])) << 8 | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(a[(v >> s) & 63]);
  }
  if (i < bytes.size()) {
    uint32_t v = uint32_t(uint8_t(bytes[i])) << 16;
    if (i + 1 < bytes.size()) v |= uint32_t(uint8_t(bytes[i + 1])) << 8;
    out.push_back(a[(v >> 18) & 63]);
    out.push_back(a[(v >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? a[(v >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string npy_bytes(int rows, int hidden, float scale) {
  std::vector<float> v(size_t(rows) * size_t(hidden));
  for (size_t k = 0; k < v.size(); ++k) v[k] = scale * float(int((k * 37) % 23) - 11) / 11.f;
  const std::string path = temp_dir("serve-npy") + "/rows.npy";
  write_npy(path, {rows, hidden}, v.data());
  return read_file(path);
}

ServeProcess::ServeProcess(const std::string& args) {
  int out[2];
  if (::pipe(out) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ == 0) {
    ::dup2(out[1], 1);
    ::close(out[0]);
    ::close(out[1]);
    const std::string cmd = std::string("exec ") + SPLITDEC_BINARY + " serve --port 0 " + args;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  // The first line: "splitdec serve: NAME on http://HOST:PORT (...)".
  std::string line;
  char c;
  while (::read(out[0], &c, 1) == 1 && c != '\n') line += c;
  ::close(out[0]);
  const size_t colon = line.rfind(':', line.find(" ("));
  if (line.find("http://") == std::string::npos || colon == std::string::npos)
    throw std::runtime_error("splitdec serve did not report its port: '" + line + "'");
  port_ = std::stoi(line.substr(colon + 1));
}

ServeProcess::~ServeProcess() {
  if (pid_ > 0 && wait(0) == -1) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

void ServeProcess::signal(int sig) { ::kill(pid_, sig); }

int ServeProcess::wait(int timeout_ms) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (std::chrono::steady_clock::now() >= end) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace splitdec::test
