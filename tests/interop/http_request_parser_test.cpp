#include "kareus/interop/http_request_parser.h"

#include <string>

#include <gtest/gtest.h>

namespace kareus::interop {
namespace {

using State = HttpRequestParser::State;

constexpr HttpLimits kLimits{100, 256, 8};  // body, header bytes, header fields

/// Feeds `bytes` whole (or one byte at a time) and returns the parser; `consumed` gets the count.
HttpRequestParser parse(const std::string& bytes, bool byte_by_byte = false, std::size_t* consumed = nullptr) {
  HttpRequestParser parser(kLimits);
  std::size_t total = 0;
  if (byte_by_byte) {
    while (total < bytes.size() && parser.state() == State::kNeedMore) {
      total += parser.feed(std::string_view(bytes).substr(total, 1));
    }
  } else {
    total = parser.feed(bytes);
  }
  if (consumed != nullptr) *consumed = total;
  return parser;
}

TEST(HttpRequestParser, ParsesALineHeadersAndAQueryWhateverTheBytesArriveIn) {
  const std::string bytes = "GET /schedule/job%2D1?rank=3&rank=4&x=a+b%21 HTTP/1.1\r\nHost: h\r\n\r\nGET /next";
  for (const bool byte_by_byte : {false, true}) {
    std::size_t consumed = 0;
    HttpRequestParser parser = parse(bytes, byte_by_byte, &consumed);
    ASSERT_EQ(parser.state(), State::kComplete);
    EXPECT_EQ(consumed, bytes.find("GET /next"));  // stops where the next request begins
    const ParsedHttpRequest request = parser.take();
    EXPECT_EQ(request.request.method, "GET");
    EXPECT_EQ(request.request.path, "/schedule/job-1");
    EXPECT_EQ(request.request.query.at("rank"), "3");  // the first value wins
    EXPECT_EQ(request.request.query.at("x"), "a b!");
    EXPECT_TRUE(request.keep_alive);
    EXPECT_FALSE(request.head);
    EXPECT_EQ(parser.state(), State::kNeedMore);
    EXPECT_FALSE(parser.started());
  }
}

TEST(HttpRequestParser, ReadsContentLengthAndChunkedBodiesAlike) {
  const std::string with_length = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 11\r\n\r\nhello world";
  // Chunks of 5 and 6 bytes, an extension, bare LF line ends and a trailer.
  const std::string chunked =
      "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n5;ext=1\r\nhello\r\n6\n world\n0\r\nX-Trailer: "
      "t\r\n\r\n";
  for (const std::string& bytes : {with_length, chunked}) {
    for (const bool byte_by_byte : {false, true}) {
      std::size_t consumed = 0;
      HttpRequestParser parser = parse(bytes, byte_by_byte, &consumed);
      ASSERT_EQ(parser.state(), State::kComplete) << parser.error_message();
      EXPECT_EQ(consumed, bytes.size());
      EXPECT_EQ(parser.take().request.body, "hello world");
    }
  }
}

TEST(HttpRequestParser, ABodyPastTheLimitIsRefusedBeforeItIsRead) {
  // Announced: refused at the end of the headers, none of the body read.
  std::size_t consumed = 0;
  const std::string head = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 101\r\n\r\n";
  HttpRequestParser announced = parse(head + std::string(101, 'x'), false, &consumed);
  EXPECT_EQ(announced.state(), State::kFailed);
  EXPECT_EQ(announced.error_status(), 413);
  EXPECT_EQ(announced.error_message(), "request body of 101 bytes is more than the 100 allowed (--max-body-bytes)");
  EXPECT_EQ(consumed, head.size());
  // Chunked: refused at the chunk that would pass it (60 + 41 > 100), before its data.
  const std::string chunks =
      "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3c\r\n" + std::string(60, 'x') + "\r\n29\r\n";
  HttpRequestParser chunked = parse(chunks + std::string(41, 'y') + "\r\n0\r\n\r\n", false, &consumed);
  EXPECT_EQ(chunked.error_status(), 413);
  EXPECT_EQ(chunked.error_message(), "chunked request body is more than the 100 bytes allowed (--max-body-bytes)");
  EXPECT_EQ(consumed, chunks.size());
  // A chunk size of 2^64 and more does not wrap around.
  HttpRequestParser huge =
      parse("POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000001\r\n");
  EXPECT_EQ(huge.error_status(), 413);
  // An endless stream of tiny chunks ends at the limit too: 101 one-byte chunks.
  std::string tiny = "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int chunk = 0; chunk < 101; ++chunk) tiny += "1\r\nz\r\n";
  EXPECT_EQ(parse(tiny, true).error_status(), 413);
}

TEST(HttpRequestParser, HeaderFieldsAreBoundedInCountAndBytes) {
  std::string many = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int field = 0; field < 9; ++field) many += "A: b\r\n";
  HttpRequestParser counted = parse(many + "\r\n");
  EXPECT_EQ(counted.error_status(), 431);
  EXPECT_EQ(counted.error_message(), "more than 8 header fields");
  // One endless header line: refused once the budget is passed, whatever follows.
  std::size_t consumed = 0;
  HttpRequestParser long_line = parse("GET / HTTP/1.1\r\nHost: h\r\nA: " + std::string(100000, 'b'), false, &consumed);
  EXPECT_EQ(long_line.error_status(), 431);
  EXPECT_EQ(long_line.error_message(), "the request line and header fields are longer than 256 bytes");
  EXPECT_EQ(consumed, 25u);  // the request line and Host; nothing of the endless one is kept
  // Trailers count against the same budget.
  std::string trailers = "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n";
  for (int field = 0; field < 8; ++field) trailers += "T: x\r\n";
  EXPECT_EQ(parse(trailers + "\r\n").error_status(), 431);
}

TEST(HttpRequestParser, AmbiguousFramingIsRefused) {
  const auto status_of = [](const std::string& headers) {
    return parse("POST /a HTTP/1.1\r\nHost: h\r\n" + headers + "\r\n").error_status();
  };
  EXPECT_EQ(status_of("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n"), 400);
  EXPECT_EQ(status_of("Content-Length: 3\r\nContent-Length: 3\r\n"), 400);
  EXPECT_EQ(status_of("Content-Length: -1\r\n"), 400);
  EXPECT_EQ(status_of("Content-Length: 99999999999999999999\r\n"), 400);
  EXPECT_EQ(status_of("Transfer-Encoding: gzip, chunked\r\n"), 501);
  EXPECT_EQ(status_of("A: b\r\n folded\r\n"), 400);
  EXPECT_EQ(status_of("Bad Name: b\r\n"), 400);
  EXPECT_EQ(status_of("A: b\rc\r\n"), 400);
  EXPECT_EQ(status_of("Expect: something\r\n"), 417);
  EXPECT_EQ(parse("GET / HTTP/2.0\r\n\r\n").error_status(), 505);
  EXPECT_EQ(parse("GET  / HTTP/1.1\r\nHost: h\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("GET /%zz HTTP/1.1\r\nHost: h\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n").error_status(), 400);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nab\r\n").error_status(), 400);
}

TEST(HttpRequestParser, HostIsRequiredOnceAndAbsoluteFormTargetsAreAccepted) {
  // RFC 9112 section 3.2: an HTTP/1.1 request without Host, or any with two, is answered 400.
  HttpRequestParser missing = parse("GET /info HTTP/1.1\r\nX: y\r\n\r\n");
  EXPECT_EQ(missing.error_status(), 400);
  EXPECT_EQ(missing.error_message(), "no Host header field (HTTP/1.1 requires one)");
  HttpRequestParser twice = parse("GET /info HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n");
  EXPECT_EQ(twice.error_status(), 400);
  EXPECT_EQ(twice.error_message(), "Host given twice");
  EXPECT_EQ(parse("GET /info HTTP/1.0\r\n\r\n").state(), State::kComplete);  // HTTP/1.0 needs none
  // Section 3.2.2: a server accepts the absolute form; its authority stands in for Host.
  for (const std::string target : {"http://x:8000/schedule/j?rank=2", "HTTP://x/schedule/j?rank=2"}) {
    HttpRequestParser absolute = parse("GET " + target + " HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_EQ(absolute.state(), State::kComplete) << target << ": " << absolute.error_message();
    const ParsedHttpRequest request = absolute.take();
    EXPECT_EQ(request.request.path, "/schedule/j");
    EXPECT_EQ(request.request.query.at("rank"), "2");
  }
  HttpRequestParser bare = parse("GET http://x HTTP/1.1\r\nHost: x\r\n\r\n");  // an empty path is "/"
  ASSERT_EQ(bare.state(), State::kComplete) << bare.error_message();
  EXPECT_EQ(bare.take().request.path, "/");
  EXPECT_EQ(parse("GET http:/x HTTP/1.1\r\nHost: h\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("GET ftp://x/ HTTP/1.1\r\nHost: h\r\n\r\n").error_status(), 400);
  EXPECT_EQ(parse("GET http:///info HTTP/1.1\r\nHost: h\r\n\r\n").error_status(), 400);  // no authority
}

TEST(HttpRequestParser, ConnectionHeadAndExpectContinue) {
  EXPECT_FALSE(parse("GET / HTTP/1.1\r\nHost: h\r\nConnection: Keep-Alive, close\r\n\r\n").take().keep_alive);
  EXPECT_FALSE(parse("GET / HTTP/1.0\r\n\r\n").take().keep_alive);
  EXPECT_TRUE(parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").take().keep_alive);
  EXPECT_TRUE(parse("HEAD /info HTTP/1.1\r\nHost: h\r\n\r\n").take().head);
  HttpRequestParser waiting = parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n");
  EXPECT_EQ(waiting.state(), State::kNeedMore);
  EXPECT_TRUE(waiting.awaits_continue());
  EXPECT_EQ(waiting.feed("ok"), 2u);
  EXPECT_EQ(waiting.take().request.body, "ok");
  // Over the limit: 413 at once, no 100 Continue (the client need not send the body at all).
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 200\r\nExpect: 100-continue\r\n\r\n").error_status(),
            413);
}

}  // namespace
}  // namespace kareus::interop
