// kareus/interop/http_request_parser.h - an incremental, bounded HTTP/1.1 request parser.
//
// The server of `kareus serve` (pfo_http_server.h) feeds it whatever bytes a connection
// delivers; it holds at most one request at a time and refuses, as soon as the bytes show it, a
// request that would pass a bound: the request line and header fields (and a chunked body's
// trailers) over `max_header_bytes` or `max_headers` (431), a body over `max_body_bytes` (413)
// whether announced by Content-Length or decoded chunk by chunk, so nothing past a bound is ever
// buffered. It also refuses what could let two parsers disagree about where a request ends
// (Content-Length with Transfer-Encoding, repeated lengths, folded header lines: 400), an
// HTTP/1.1 request without Host or any with two (400, RFC 9112 section 3.2), and
// transfer codings other than chunked (501). Transport-free, so it is unit-tested and fuzzed
// directly. Sizes in bytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kareus/interop/pfo_service.h"

namespace kareus::interop {

struct HttpLimits {
  std::size_t max_body_bytes = 1u << 20;     ///< decoded body
  std::size_t max_header_bytes = 16u << 10;  ///< request line + header fields (+ trailers), with line ends
  std::size_t max_headers = 64;              ///< header fields (+ trailer fields)
};

/// A complete request as the service sees it, plus what the transport needs to answer it.
struct ParsedHttpRequest {
  HttpRequest request;     ///< path percent-decoded; query parameters decoded, first value wins
  bool keep_alive = true;  ///< HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive
  bool head = false;       ///< HEAD: answer the headers of GET without the body
};

class HttpRequestParser {
 public:
  enum class State {
    kNeedMore,  ///< feed more bytes
    kComplete,  ///< take() the request
    kFailed,    ///< answer error_status() and close: the stream cannot be resynchronized
  };

  explicit HttpRequestParser(HttpLimits limits);

  /// Consumes a prefix of `data` and returns its length. Stops at the end of a request (state
  /// kComplete; the rest of `data` belongs to the next one) or at an error (kFailed).
  std::size_t feed(std::string_view data);

  [[nodiscard]] State state() const { return state_; }
  /// Whether any byte of the current request has arrived (an idle connection has none).
  [[nodiscard]] bool started() const { return started_; }
  /// The header section is complete, a body is expected, and the client asked for
  /// "Expect: 100-continue": it waits for an interim "100 Continue" before sending the body.
  [[nodiscard]] bool awaits_continue() const;

  /// The complete request (state kComplete); the parser then waits for the next request.
  [[nodiscard]] ParsedHttpRequest take();

  /// For kFailed: the status to answer (400, 413, 414, 417, 431, 501, 505) and why.
  [[nodiscard]] int error_status() const { return error_status_; }
  [[nodiscard]] const std::string& error_message() const { return error_message_; }

 private:
  enum class Phase { kRequestLine, kHeaders, kBody, kChunkSize, kChunkData, kChunkDataEnd, kTrailers };

  /// Collects one line into line_; returns true when it is complete (line end removed).
  bool take_line(std::string_view data, std::size_t& offset, std::size_t limit, bool header_budget);
  void fail(int status, std::string message);
  void on_request_line();
  void on_header_line();
  void on_headers_done();
  void on_chunk_size_line();
  void reset();

  HttpLimits limits_;
  State state_ = State::kNeedMore;
  Phase phase_ = Phase::kRequestLine;
  bool started_ = false;
  std::string line_;
  bool line_has_cr_ = false;
  std::size_t header_bytes_ = 0;
  std::size_t header_count_ = 0;
  ParsedHttpRequest current_;
  bool http10_ = false;
  bool chunked_ = false;
  bool has_length_ = false;
  bool has_host_ = false;
  std::string absolute_path_;  ///< the path and query of an absolute-form target
  bool expect_continue_ = false;
  bool connection_close_ = false;
  bool connection_keep_alive_ = false;
  std::size_t body_left_ = 0;  ///< of Content-Length, or of the current chunk
  int error_status_ = 0;
  std::string error_message_;
};

/// The reason phrase of the statuses `kareus serve` answers ("Payload Too Large" for 413).
[[nodiscard]] std::string_view http_reason(int status);

}  // namespace kareus::interop
