// Load test of `kareus serve` over loopback: C concurrent clients (threads, one keep-alive
// connection each) x R GET /schedule requests against a running server, after registering a
// 16-rank job (TP 8, PP 2). Prints latency percentiles (ms) and throughput; exits 1 on any
// error or on an answer that differs from the rank's first one. Run by bench/serve_load.sh:
//   serve_load_bench http://127.0.0.1:PORT [clients=64] [requests=100]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <fmt/core.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

namespace {

constexpr int kTp = 8;
constexpr int kPp = 2;
constexpr int kWorld = kTp * kPp;

double percentile_ms(std::vector<double>& sorted_s, double fraction) {
  const std::size_t index =
      std::min(sorted_s.size() - 1, static_cast<std::size_t>(fraction * static_cast<double>(sorted_s.size())));
  return sorted_s[index] * 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: serve_load_bench http://HOST:PORT [clients] [requests]\n");
    return 2;
  }
  const std::string url = argv[1];
  const int clients = argc > 2 ? std::stoi(argv[2]) : 64;
  const int requests = argc > 3 ? std::stoi(argv[3]) : 100;

  httplib::Client setup(url);
  const nlohmann::json job_info = {
      {"job_id", ""}, {"pp_degree", kPp}, {"dp_degree", 1}, {"tp_degree", kTp}, {"world_size", kWorld}};
  auto job = setup.Post("/register_job", job_info.dump(), "application/json");
  if (!job || job->status != 200) {
    std::fprintf(stderr, "register_job failed\n");
    return 1;
  }
  const std::string job_id = nlohmann::json::parse(job->body).get<std::string>();
  std::vector<std::string> expected(kWorld);
  for (int rank = 0; rank < kWorld; ++rank) {
    const nlohmann::json rank_info = {{"rank", rank},
                                      {"dp_rank", 0},
                                      {"pp_rank", rank / kTp},
                                      {"tp_rank", rank % kTp},
                                      {"available_frequencies", nlohmann::json::array()}};
    auto registered = setup.Post("/register_rank/" + job_id, rank_info.dump(), "application/json");
    auto schedule = setup.Get(("/schedule/" + job_id + "?rank=" + std::to_string(rank)).c_str());
    if (!registered || registered->status != 200 || !schedule || schedule->status != 200) {
      std::fprintf(stderr, "registering rank %d failed\n", rank);
      return 1;
    }
    expected[rank] = schedule->body;
  }
  setup.stop();  // the server serves one connection per worker thread: free this one

  std::vector<std::vector<double>> latencies(clients);
  std::atomic<int> errors{0};
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int client = 0; client < clients; ++client) {
    threads.emplace_back([&, client] {
      httplib::Client connection(url);
      connection.set_keep_alive(true);
      connection.set_tcp_nodelay(true);
      const int rank = client % kWorld;
      const std::string path = "/schedule/" + job_id + "?rank=" + std::to_string(rank);
      latencies[client].reserve(requests);
      ++ready;
      while (!go.load()) std::this_thread::yield();
      for (int request = 0; request < requests; ++request) {
        const auto start = std::chrono::steady_clock::now();
        auto response = connection.Get(path.c_str());
        const auto end = std::chrono::steady_clock::now();
        if (!response || response->status != 200 || response->body != expected[rank]) ++errors;
        latencies[client].push_back(std::chrono::duration<double>(end - start).count());
      }
    });
  }
  while (ready.load() < clients) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go = true;
  for (auto& thread : threads) thread.join();
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::vector<double> all;
  for (const auto& list : latencies) all.insert(all.end(), list.begin(), list.end());
  std::sort(all.begin(), all.end());
  fmt::print("{} clients x {} GET /schedule = {} requests, {} errors, {:.2f} s, {:.0f} requests/s\n", clients, requests,
             all.size(), errors.load(), wall_s, static_cast<double>(all.size()) / wall_s);
  fmt::print("latency ms: p50 {:.3f}, p90 {:.3f}, p99 {:.3f}, max {:.3f}\n", percentile_ms(all, 0.50),
             percentile_ms(all, 0.90), percentile_ms(all, 0.99), all.back() * 1e3);
  return errors.load() == 0 ? 0 : 1;
}
