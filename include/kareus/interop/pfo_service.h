// kareus/interop/pfo_service.h - the state machine behind `kareus serve`, free of any transport.
//
// Speaks Zeus 0.16's pipeline frequency optimizer (PFO) protocol (REFERENCE.md section 11) over a
// kareus frontier: jobs register (pp x dp x tp = world_size, pp = the plans' stages), ranks
// register with their (dp, pp, tp) coordinates, and each rank's GET /schedule answers its stage's
// [instruction, MHz] list of the job's current plan (the fastest frontier point at first), the
// stage being the rank's registered pp_rank as in Zeus. Beyond Zeus: GET /comm_schedule (the
// stage's per-instruction comm configs), POST /deadline (switch the job to the least-energy point
// meeting an iteration-time deadline, runtime/deadline.h) and posted results appended to a JSONL
// log. Every method is thread-safe; the HTTP layer (pfo_http_server.h) only moves bytes.
// Units: seconds, joules (one iteration, whole job), MHz.
#pragma once

#include <cstddef>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kareus/plan/plan.h"

namespace kareus::interop {

/// One frontier point with its plan.
struct ServedPlan {
  double time_s = 0;
  double energy_j = 0;
  std::string path;  ///< where the plan came from (for messages and /deadline answers)
  plan::Plan plan;
};

/// The frontier `kareus serve --frontier PATH` serves, Pareto points sorted by time (fastest
/// first). PATH is one of: the OUT folder of `kareus plan` or its summary.json (the frontier of
/// `method`, at the emulated time and energy); OUT/plans/<method>/ (the same, the method named by
/// the folder); a kareus.frontier/1 file or a folder holding frontier.json; any other folder of
/// plan_N.json files (each at its plan's predicted time and energy). Every plan must have the
/// same stages and microbatches. Throws InputError naming the path and the plan otherwise.
[[nodiscard]] std::vector<ServedPlan> load_served_frontier(const std::filesystem::path& path,
                                                           const std::string& method = "kareus");

/// Appends one JSON object per line to a file; one writer at a time (a mutex), flushed per line.
class ResultLog {
 public:
  /// Opens `path` for appending. Throws InputError naming --results when it cannot.
  explicit ResultLog(const std::filesystem::path& path);
  ~ResultLog();
  ResultLog(const ResultLog&) = delete;
  ResultLog& operator=(const ResultLog&) = delete;
  /// Appends `line` (no newline inside) and flushes. Throws Error when the write fails.
  void append(const std::string& line);

 private:
  std::mutex mutex_;
  std::FILE* file_ = nullptr;
  std::string path_;
};

struct HttpRequest {
  std::string method;  ///< "GET", "POST", ...
  std::string path;    ///< decoded, without the query
  std::map<std::string, std::string> query;
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string body;  ///< JSON; errors are {"detail": "...", "field": "..."}
};

class PfoService {
 public:
  /// `frontier` non-empty, sorted by time; `results` may be null (posted results are then
  /// validated and dropped). `max_jobs` bounds the jobs held at once (503 beyond).
  PfoService(std::vector<ServedPlan> frontier, ResultLog* results, std::size_t max_jobs = 1024);
  ~PfoService();

  /// Routes one request; never throws. 400 malformed body or query (naming the field), 404
  /// unknown route or job, 405 wrong method, 409 a rank that has not registered, 503 too many jobs.
  [[nodiscard]] HttpResponse handle(const HttpRequest& request);

  [[nodiscard]] std::size_t job_count() const;

 private:
  struct Job;
  HttpResponse register_job(const std::string& body);
  HttpResponse register_rank(const std::string& job_id, const std::string& body);
  HttpResponse schedule(const std::string& job_id, const HttpRequest& request, bool comm);
  HttpResponse deadline(const std::string& job_id, const std::string& body);
  HttpResponse result(const std::string& job_id, const std::string& body);
  HttpResponse info() const;

  std::vector<ServedPlan> frontier_;
  /// Per plan and stage, the JSON arrays the schedule routes answer (built once).
  std::vector<std::vector<std::string>> frequencies_json_;
  std::vector<std::vector<std::string>> comm_json_;
  ResultLog* results_;
  std::size_t max_jobs_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::size_t next_job_ = 0;
};

}  // namespace kareus::interop
