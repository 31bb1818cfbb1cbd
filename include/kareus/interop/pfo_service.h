// kareus/interop/pfo_service.h - the state machine behind `kareus serve`, free of any transport.
//
// Speaks Zeus 0.16's pipeline frequency optimizer (PFO) protocol (docs/kareus.md section 11) over a
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
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kareus/common/error.h"
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

/// Appends one JSON object per line to the `--results` file: each line with one write(2), undone
/// (the file cut back) when the write fails or is short, so the file only ever holds whole lines;
/// at most `max_bytes` in all. One writer: a mutex within the process, flock(2) across processes.
class ResultLog {
 public:
  static constexpr std::uint64_t kDefaultMaxBytes = std::uint64_t{1} << 30;  ///< 1 GiB

  /// Opens `path` (a regular file or none) for appending. A torn last line left by a crash of
  /// an older writer is cut off (see dropped_tail_bytes). Throws InputError naming --results when
  /// it cannot open or lock the file, or when it is not a regular file.
  explicit ResultLog(const std::filesystem::path& path, std::uint64_t max_bytes = kDefaultMaxBytes);
  ~ResultLog();
  ResultLog(const ResultLog&) = delete;
  ResultLog& operator=(const ResultLog&) = delete;
  /// Appends `line` (no newline inside) and its newline. Throws ResultLogFull (nothing written)
  /// past max_bytes or when the disk is full, Error when the write fails otherwise.
  void append(const std::string& line);
  /// Bytes of a torn last line cut off when the file was opened (0: none).
  [[nodiscard]] std::uint64_t dropped_tail_bytes() const { return dropped_tail_bytes_; }

 private:
  std::mutex mutex_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t max_bytes_;
  std::uint64_t dropped_tail_bytes_ = 0;
  std::string path_;
};

/// The results file cannot take a line (its cap or the disk is full); HTTP 507.
class ResultLogFull : public Error {
 public:
  using Error::Error;
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

/// What the service holds at most. Past either bound the least recently used other jobs are
/// forgotten (their later requests get 404); one job's ranks are at most its world size.
struct PfoServiceLimits {
  std::size_t max_jobs = 1024;
  std::size_t max_ranks = std::size_t{1} << 20;  ///< registered ranks over all jobs
};

class PfoService {
 public:
  /// `frontier` non-empty, sorted by time; `results` may be null (posted results are then
  /// validated and dropped).
  PfoService(std::vector<ServedPlan> frontier, ResultLog* results, PfoServiceLimits limits = {});
  ~PfoService();

  /// Routes one request; never throws. 400 malformed body or query (naming the field), 404
  /// unknown route or job, 405 wrong method, 409 a rank that has not registered, 503 a job whose
  /// ranks alone pass max_ranks, 507 a result the results file cannot take.
  [[nodiscard]] HttpResponse handle(const HttpRequest& request);

  [[nodiscard]] std::size_t job_count() const;
  [[nodiscard]] std::size_t rank_count() const;

 private:
  struct Job;
  HttpResponse register_job(const std::string& body);
  HttpResponse register_rank(const std::string& job_id, const std::string& body);
  HttpResponse schedule(const std::string& job_id, const HttpRequest& request, bool comm);
  HttpResponse deadline(const std::string& job_id, const std::string& body);
  HttpResponse result(const std::string& job_id, const std::string& body);
  HttpResponse info() const;
  /// The job named `job_id`, marked as just used; nullptr when unknown. Caller holds mutex_.
  Job* find_job(const std::string& job_id);
  /// Forgets least recently used jobs other than `keep` until `fits` holds. Caller holds mutex_.
  template <typename Fits>
  void evict_until(const Job* keep, Fits fits);
  [[nodiscard]] HttpResponse unknown_job(const std::string& job_id) const;

  std::vector<ServedPlan> frontier_;
  /// Per plan and stage, the JSON arrays the schedule routes answer (built once).
  std::vector<std::vector<std::string>> frequencies_json_;
  std::vector<std::vector<std::string>> comm_json_;
  ResultLog* results_;
  PfoServiceLimits limits_;
  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<Job>> jobs_;
  std::size_t next_job_ = 0;
  std::size_t rank_count_ = 0;   ///< registered ranks over all jobs
  std::uint64_t use_clock_ = 0;  ///< ticks once per job use, for least-recently-used eviction
};

}  // namespace kareus::interop
