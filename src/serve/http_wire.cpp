#include "serve/http_wire.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace splitdec::serve {

namespace {

RequestHead refuse(int status, std::string reason) {
  RequestHead h;
  h.state = RequestHead::State::Refused;
  h.status = status;
  h.reason = std::move(reason);
  return h;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// RFC 9110's token characters: what a method or a header name may hold.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
  });
}

// Whether a comma-separated header value holds `item` (case-insensitive).
bool lists(std::string_view value, std::string_view item) {
  const std::string v = lower(value);
  size_t start = 0;
  while (start <= v.size()) {
    const size_t comma = std::min(v.find(',', start), v.size());
    if (trim(std::string_view(v).substr(start, comma - start)) == item) return true;
    start = comma + 1;
  }
  return false;
}

}  // namespace

const std::string* HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return &value;
  return nullptr;
}

RequestHead read_request_head(std::string_view received, const HttpLimits& limits) {
  // The head ends at the first empty line (CRLF CRLF, or bare LFs as RFC 9112 allows readers to accept).
  size_t end = std::string_view::npos, after = 0;
  for (size_t i = received.find('\n'); i != std::string_view::npos; i = received.find('\n', i + 1)) {
    const size_t next = i + 1;
    if (next < received.size() && received[next] == '\n') { end = i; after = next + 1; break; }
    if (next + 1 < received.size() && received[next] == '\r' && received[next + 1] == '\n') { end = i; after = next + 2; break; }
    if (next >= limits.max_head_bytes) break;
  }
  if (end == std::string_view::npos) {
    if (received.size() > limits.max_head_bytes)
      return refuse(431, "the request head exceeds the server's limit of " + std::to_string(limits.max_head_bytes) + " bytes");
    return {};
  }
  if (after > limits.max_head_bytes)
    return refuse(431, "the request head exceeds the server's limit of " + std::to_string(limits.max_head_bytes) + " bytes");

  RequestHead h;
  std::vector<std::string_view> lines;
  for (size_t start = 0; start < end + 1;) {
    size_t nl = received.find('\n', start);
    std::string_view line = received.substr(start, nl - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.push_back(line);
    start = nl + 1;
  }
  if (lines.empty()) return refuse(400, "empty request line");
  if (lines.size() - 1 > limits.max_header_count)
    return refuse(431, "the request has " + std::to_string(lines.size() - 1) + " header lines; the server's limit is " +
                           std::to_string(limits.max_header_count));

  // Request line: METHOD SP target SP HTTP/1.x
  const std::string_view rl = lines[0];
  const size_t sp1 = rl.find(' '), sp2 = rl.rfind(' ');
  if (sp1 == std::string_view::npos || sp2 == sp1) return refuse(400, "malformed request line");
  const std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1), version = rl.substr(sp2 + 1);
  if (!is_token(method)) return refuse(400, "malformed request method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return refuse(505, "only HTTP/1.0 and HTTP/1.1 are spoken here");
  if (target.empty() || target.find_first_of(" \t") != std::string_view::npos) return refuse(400, "malformed request target");
  h.request.method = std::string(method);
  std::string_view path = target;
  // An absolute-form target (a proxy's): keep its path.
  if (const size_t scheme = path.find("://"); scheme != std::string_view::npos && path.front() != '/') {
    const size_t slash = path.find('/', scheme + 3);
    path = slash == std::string_view::npos ? std::string_view("/") : path.substr(slash);
  }
  const size_t q = path.find('?');
  h.request.path = std::string(path.substr(0, q));
  if (q != std::string_view::npos) h.request.query = std::string(path.substr(q + 1));

  bool has_length = false;
  unsigned long long length = 0;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') return refuse(400, "folded header lines are not accepted");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
      return refuse(400, "malformed header line " + std::to_string(i));
    std::string name = lower(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (value.find_first_of("\r\n") != std::string_view::npos || value.find('\0') != std::string_view::npos)
      return refuse(400, "header " + name + " holds a control character");
    if (name == "content-length") {
      unsigned long long v = 0;
      if (value.empty() || value.size() > 19 || !std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return refuse(400, "Content-Length must be a decimal byte count");
      for (char c : value) v = v * 10 + unsigned(c - '0');
      if (has_length && v != length) return refuse(400, "conflicting Content-Length headers");
      has_length = true;
      length = v;
    } else if (name == "transfer-encoding") {
      // Chunked uploads would need their own size and time accounting; the
      // OpenAI clients always send Content-Length.
      return refuse(411, "chunked request bodies are not accepted: send Content-Length");
    } else if (name == "expect") {
      if (lower(value) != "100-continue") return refuse(417, "only Expect: 100-continue is understood");
      h.expect_continue = true;
    }
    h.request.headers.emplace_back(std::move(name), std::string(value));
  }
  if (length > limits.max_body_bytes)
    return refuse(413, "the request body (" + std::to_string(length) + " bytes) exceeds the server's limit of " +
                           std::to_string(limits.max_body_bytes) + " bytes (--max-body-mb)");
  if (!has_length && (h.request.method == "POST" || h.request.method == "PUT"))
    return refuse(411, "a request with a body must send Content-Length");
  const std::string* connection = h.request.header("connection");
  h.request.keep_alive = version == "HTTP/1.1" ? !(connection && lists(*connection, "close"))
                                               : (connection && lists(*connection, "keep-alive"));
  h.state = RequestHead::State::Ready;
  h.head_bytes = after;
  h.body_bytes = size_t(length);
  return h;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 499: return "Client Closed Request";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

std::string response_head(const HttpResponse& response, long long body_length, bool keep_alive) {
  std::string h = "HTTP/1.1 " + std::to_string(response.status) + " " + reason_phrase(response.status) + "\r\n";
  if (!response.content_type.empty()) h += "Content-Type: " + response.content_type + "\r\n";
  for (const auto& [name, value] : response.headers) h += name + ": " + value + "\r\n";
  h += body_length < 0 ? std::string("Transfer-Encoding: chunked\r\n") : "Content-Length: " + std::to_string(body_length) + "\r\n";
  h += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return h;
}

std::string chunk(std::string_view data) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size);
  out.append(data);
  out += "\r\n";
  return out;
}

}  // namespace splitdec::serve
