#include "kareus/interop/http_request_parser.h"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

namespace kareus::interop {
namespace {

/// Longest chunk-size line (hex size and extensions) accepted.
constexpr std::size_t kMaxChunkLineBytes = 1024;

bool is_token_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view text) { return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char); }

std::string lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](char c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; });
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/// Percent-decodes `text` ('+' is a space in a query); false on a broken escape.
bool percent_decode(std::string_view text, bool plus_is_space, std::string& out) {
  out.clear();
  for (std::size_t index = 0; index < text.size(); ++index) {
    const char c = text[index];
    if (c == '%') {
      if (index + 2 >= text.size()) return false;
      const int high = hex_value(text[index + 1]);
      const int low = hex_value(text[index + 2]);
      if (high < 0 || low < 0) return false;
      out.push_back(static_cast<char>(high * 16 + low));
      index += 2;
    } else {
      out.push_back(plus_is_space && c == '+' ? ' ' : c);
    }
  }
  return true;
}

/// A header value: visible characters, spaces and tabs only (no CR, LF, NUL or other controls).
bool is_field_value(std::string_view value) {
  return std::all_of(value.begin(), value.end(), [](char c) {
    const auto byte = static_cast<unsigned char>(c);
    return byte == '\t' || (byte >= 0x20 && byte != 0x7f);
  });
}

}  // namespace

HttpRequestParser::HttpRequestParser(HttpLimits limits) : limits_(limits) {}

void HttpRequestParser::fail(int status, std::string message) {
  state_ = State::kFailed;
  error_status_ = status;
  error_message_ = std::move(message);
}

void HttpRequestParser::reset() {
  state_ = State::kNeedMore;
  phase_ = Phase::kRequestLine;
  started_ = false;
  line_.clear();
  header_bytes_ = 0;
  header_count_ = 0;
  current_ = {};
  http10_ = chunked_ = has_length_ = has_host_ = expect_continue_ = connection_close_ = connection_keep_alive_ = false;
  body_left_ = 0;
}

ParsedHttpRequest HttpRequestParser::take() {
  ParsedHttpRequest request = std::move(current_);
  reset();
  return request;
}

bool HttpRequestParser::awaits_continue() const {
  const bool in_body = phase_ == Phase::kBody || phase_ == Phase::kChunkSize;
  return expect_continue_ && state_ == State::kNeedMore && in_body && current_.request.body.empty() && line_.empty();
}

bool HttpRequestParser::take_line(std::string_view data, std::size_t& offset, std::size_t limit, bool header_budget) {
  const std::size_t newline = data.find('\n', offset);
  const std::size_t end = newline == std::string_view::npos ? data.size() : newline + 1;
  const std::size_t count = end - offset;
  if (header_budget) {
    header_bytes_ += count;
    if (header_bytes_ > limits_.max_header_bytes) {
      fail(431, fmt::format("the request line and header fields are longer than {} bytes", limits_.max_header_bytes));
      return false;
    }
  } else if (line_.size() + count > limit) {
    fail(400,
         fmt::format("malformed chunked body: more than {} bytes where a chunk size or a line end belongs", limit));
    return false;
  }
  line_.append(data.substr(offset, newline == std::string_view::npos ? count : count - 1));
  offset = end;
  if (newline == std::string_view::npos) return false;
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  return true;
}

std::size_t HttpRequestParser::feed(std::string_view data) {
  std::size_t offset = 0;
  while (offset < data.size() && state_ == State::kNeedMore) {
    started_ = true;
    switch (phase_) {
      case Phase::kRequestLine:
        if (take_line(data, offset, 0, true)) {
          // An empty line before a request is tolerated (RFC 9112 section 2.2).
          if (!line_.empty()) on_request_line();
          line_.clear();
        }
        break;
      case Phase::kHeaders:
      case Phase::kTrailers:
        if (take_line(data, offset, 0, true)) {
          on_header_line();
          line_.clear();
        }
        break;
      case Phase::kBody:
      case Phase::kChunkData: {
        const std::size_t take = std::min(body_left_, data.size() - offset);
        current_.request.body.append(data.substr(offset, take));
        offset += take;
        body_left_ -= take;
        if (body_left_ == 0) {
          if (phase_ == Phase::kBody) {
            state_ = State::kComplete;
          } else {
            phase_ = Phase::kChunkDataEnd;
          }
        }
        break;
      }
      case Phase::kChunkSize:
        if (take_line(data, offset, kMaxChunkLineBytes, false)) {
          on_chunk_size_line();
          line_.clear();
        }
        break;
      case Phase::kChunkDataEnd:
        if (take_line(data, offset, 2, false)) {
          if (!line_.empty()) fail(400, "malformed chunked body: chunk data not followed by a line end");
          phase_ = Phase::kChunkSize;
          line_.clear();
        }
        break;
    }
  }
  return offset;
}

void HttpRequestParser::on_request_line() {
  const std::size_t first = line_.find(' ');
  const std::size_t second = first == std::string::npos ? std::string::npos : line_.find(' ', first + 1);
  if (second == std::string::npos || line_.find(' ', second + 1) != std::string::npos) {
    fail(400, "malformed request line (expected METHOD /path HTTP/1.1)");
    return;
  }
  const std::string_view line(line_);
  const std::string_view method = line.substr(0, first);
  const std::string_view version = line.substr(second + 1);
  if (!is_token(method) || method.size() > 32) {
    fail(400, "malformed request line: the method is not a token");
    return;
  }
  std::string_view target = line.substr(first + 1, second - first - 1);
  const bool visible = std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; });
  // RFC 9112 section 3.2.2: a server accepts the absolute form (http://host:port/path?query) too;
  // only its path and query are routed.
  if (visible && (lower(target.substr(0, 7)) == "http://" || lower(target.substr(0, 8)) == "https://")) {
    const std::size_t authority = target.find("//") + 2;
    const std::size_t path = target.find_first_of("/?", authority);
    if (path == authority) {
      fail(400, "malformed request target: an absolute-form target without a host");
      return;
    }
    absolute_path_ = path == std::string_view::npos ? std::string_view() : target.substr(path);
    if (absolute_path_.empty() || absolute_path_.front() == '?') absolute_path_.insert(0, "/");
    target = absolute_path_;
  }
  if (target.empty() || target.front() != '/' || !visible) {
    fail(400, "malformed request line: the target must be a path starting with '/' or an http:// URL");
    return;
  }
  if (version == "HTTP/1.1") {
    http10_ = false;
  } else if (version == "HTTP/1.0") {
    http10_ = true;
  } else if (version.size() == 8 && version.substr(0, 5) == "HTTP/" && version[6] == '.') {
    fail(505, fmt::format("HTTP version {} is not supported (HTTP/1.1 or HTTP/1.0)", version));
    return;
  } else {
    fail(400, "malformed request line: unknown protocol version");
    return;
  }
  HttpRequest& request = current_.request;
  request.method = std::string(method);
  const std::size_t question = target.find('?');
  if (!percent_decode(target.substr(0, question), false, request.path)) {
    fail(400, "malformed request target: a broken %-escape in the path");
    return;
  }
  if (question != std::string_view::npos) {
    std::string_view query = target.substr(question + 1);
    std::string name;
    std::string value;
    while (!query.empty()) {
      const std::size_t amp = query.find('&');
      const std::string_view pair = query.substr(0, amp);
      query.remove_prefix(amp == std::string_view::npos ? query.size() : amp + 1);
      if (pair.empty()) continue;
      const std::size_t equals = pair.find('=');
      const std::string_view raw_value = equals == std::string_view::npos ? "" : pair.substr(equals + 1);
      if (!percent_decode(pair.substr(0, equals), true, name) || !percent_decode(raw_value, true, value)) {
        fail(400, "malformed request target: a broken %-escape in the query");
        return;
      }
      request.query.emplace(name, value);  // the first value of a name wins
    }
  }
  current_.head = method == "HEAD";
  phase_ = Phase::kHeaders;
}

void HttpRequestParser::on_header_line() {
  if (line_.empty()) {
    if (phase_ == Phase::kTrailers) {
      state_ = State::kComplete;
    } else {
      on_headers_done();
    }
    return;
  }
  if (line_.front() == ' ' || line_.front() == '\t') {
    fail(400, "a folded header line (starting with a space) is not accepted");
    return;
  }
  if (++header_count_ > limits_.max_headers) {
    fail(431, fmt::format("more than {} header fields", limits_.max_headers));
    return;
  }
  const std::size_t colon = line_.find(':');
  const std::string_view line(line_);
  const std::string_view name = colon == std::string::npos ? std::string_view() : line.substr(0, colon);
  const std::string_view value = colon == std::string::npos ? std::string_view() : trim(line.substr(colon + 1));
  if (!is_token(name) || !is_field_value(value)) {
    fail(400, "malformed header field (expected NAME: VALUE with a token for NAME)");
    return;
  }
  if (phase_ == Phase::kTrailers) return;  // trailer fields are bounded and checked, then ignored
  const std::string field = lower(name);
  if (field == "content-length") {
    const bool digits = !value.empty() && value.size() <= 19 &&
                        std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (has_length_ || !digits) {
      fail(400, has_length_ ? "Content-Length given twice" : "Content-Length must be a decimal number of bytes");
      return;
    }
    has_length_ = true;
    std::uint64_t length = 0;
    for (char c : value) length = length * 10 + static_cast<std::uint64_t>(c - '0');
    body_left_ = static_cast<std::size_t>(length);
  } else if (field == "transfer-encoding") {
    if (chunked_ || lower(value) != "chunked") {
      fail(501, fmt::format("Transfer-Encoding '{}' is not supported (only a single chunked)", value.substr(0, 64)));
      return;
    }
    chunked_ = true;
  } else if (field == "connection") {
    std::string_view tokens = value;
    while (!tokens.empty()) {
      const std::size_t comma = tokens.find(',');
      const std::string token = lower(trim(tokens.substr(0, comma)));
      tokens.remove_prefix(comma == std::string_view::npos ? tokens.size() : comma + 1);
      connection_close_ = connection_close_ || token == "close";
      connection_keep_alive_ = connection_keep_alive_ || token == "keep-alive";
    }
  } else if (field == "host") {
    if (has_host_) {
      fail(400, "Host given twice");
      return;
    }
    has_host_ = true;
  } else if (field == "expect") {
    if (lower(value) != "100-continue") {
      fail(417, fmt::format("Expect '{}' is not supported (only 100-continue)", value.substr(0, 64)));
      return;
    }
    expect_continue_ = !http10_;
  }
}

void HttpRequestParser::on_headers_done() {
  if (!has_host_ && !http10_) {  // RFC 9112 section 3.2
    fail(400, "no Host header field (HTTP/1.1 requires one)");
    return;
  }
  if (chunked_ && has_length_) {
    fail(400, "both Content-Length and Transfer-Encoding given");
    return;
  }
  if (chunked_ && http10_) {
    fail(400, "Transfer-Encoding is not defined for HTTP/1.0");
    return;
  }
  if (has_length_ && body_left_ > limits_.max_body_bytes) {
    fail(413, fmt::format("request body of {} bytes is more than the {} allowed (--max-body-bytes)", body_left_,
                          limits_.max_body_bytes));
    return;
  }
  current_.keep_alive = http10_ ? connection_keep_alive_ && !connection_close_ : !connection_close_;
  if (chunked_) {
    phase_ = Phase::kChunkSize;
  } else if (body_left_ > 0) {
    current_.request.body.reserve(body_left_);
    phase_ = Phase::kBody;
  } else {
    state_ = State::kComplete;
  }
}

void HttpRequestParser::on_chunk_size_line() {
  std::size_t digits = 0;
  std::uint64_t size = 0;
  bool too_large = false;
  while (digits < line_.size() && hex_value(line_[digits]) >= 0) {
    size = size * 16 + static_cast<std::uint64_t>(hex_value(line_[digits]));
    too_large = too_large || size > limits_.max_body_bytes;  // stops growing before it can overflow
    if (too_large) break;
    ++digits;
  }
  if (!too_large) {
    const std::string_view rest = trim(std::string_view(line_).substr(digits));
    if (digits == 0 || (!rest.empty() && rest.front() != ';')) {
      fail(400, "malformed chunked body: a chunk size must be hexadecimal");
      return;
    }
  }
  if (too_large || current_.request.body.size() + size > limits_.max_body_bytes) {
    fail(413, fmt::format("chunked request body is more than the {} bytes allowed (--max-body-bytes)",
                          limits_.max_body_bytes));
    return;
  }
  if (size == 0) {
    phase_ = Phase::kTrailers;
    return;
  }
  body_left_ = static_cast<std::size_t>(size);
  phase_ = Phase::kChunkData;
}

std::string_view http_reason(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    case 507:
      return "Insufficient Storage";
    default:
      return "Unknown";
  }
}

}  // namespace kareus::interop
