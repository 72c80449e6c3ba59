// Helpers for the server tests: an in-process server on an ephemeral port,
// a raw socket client (for disconnects and slow readers), base64, and a
// splitdec serve subprocess (for signals).
#pragma once

#include <httplib.h>

#include <memory>
#include <string>
#include <thread>

#include "serve/http_server.h"
#include "splitdec/splitdec.h"

namespace splitdec::test {

struct TestServerOptions {
  int max_sequences = 16;
  int max_queue = 16;
  int prefill_budget = 512;
  int64_t max_length = 256;
  std::string api_key, media_dir, plan = "split";
  bool prefix_cache = true;  // --prefix-cache
  std::string preset = "tiny-gemma3";
  std::string model_dir;  // set: this folder instead of the preset's
  size_t max_body_bytes = size_t(1) << 20;
  serve::HttpLimits limits{};  // timeouts, head size, bodies in flight (max_body_bytes above is its body size)
  ImageOptions image{};  // the server's --image-tokens / --pan-and-scan
  size_t media_cache_bytes = size_t(256) << 20;  // --media-cache-mb
};

class TestServer {
 public:
  explicit TestServer(const TestServerOptions& o = {});
  ~TestServer();
  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  httplib::Client client() const;
  const Engine& engine() const { return *engine_; }
  serve::HttpServer& server() { return *server_; }  // shutdown() may be called early (and again by the destructor)

 private:
  std::shared_ptr<const Engine> engine_;
  std::unique_ptr<serve::HttpServer> server_;
  std::thread thread_;
  int port_ = 0;
};

// A raw HTTP/1.1 connection.
class RawConnection {
 public:
  explicit RawConnection(int port);
  ~RawConnection();
  void send_all(const std::string& data);
  // Reads what is there (waits up to `timeout_ms` for something); "" at EOF.
  std::string read_some(int timeout_ms, size_t max_bytes = 65536);
  // Reads until `needle` appears or the connection ends.
  std::string read_until(const std::string& needle, int timeout_ms = 60000);
  // Reads until `events` server-sent events arrived (the first is a chat stream's role).
  std::string read_until_events(int events, int timeout_ms = 60000);
  void close();

 private:
  int fd_ = -1;
};

std::string post_request(const std::string& path, const std::string& body, const std::string& extra_headers = "");
std::string base64_encode(const std::string& bytes);
// Embedding rows [rows, hidden] as the bytes of an .npy file.
std::string npy_bytes(int rows, int hidden, float scale);

// `splitdec serve` as a child process; its stdout's first line names the port.
class ServeProcess {
 public:
  explicit ServeProcess(const std::string& args);
  ~ServeProcess();
  int port() const { return port_; }
  void signal(int sig);
  // Waits for the exit; returns the exit status (or 128 + signal), -1 on timeout.
  int wait(int timeout_ms);

 private:
  int pid_ = -1;
  int port_ = 0;
};

}  // namespace splitdec::test
