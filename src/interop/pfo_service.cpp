#include "kareus/interop/pfo_service.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/interop/pfo_protocol.h"
#include "kareus/runtime/deadline.h"

namespace kareus::interop {

using nlohmann::json;

struct PfoService::Job {
  using Coordinates = std::tuple<int, int, int>;  ///< (dp, pp, tp)
  std::string id;
  JobInfo info;
  std::size_t plan_index = 0;
  std::uint64_t last_used = 0;
  std::map<int, Coordinates> ranks;        ///< by global rank (their clock lists are checked, not kept)
  std::map<Coordinates, int> coordinates;  ///< -> global rank
};

namespace {

/// Messages echo request text, which may be invalid UTF-8: replace such bytes rather than throw.
std::string dump(const json& value) { return value.dump(-1, ' ', false, json::error_handler_t::replace); }

HttpResponse error_response(int status, const std::string& message, const std::string& field = "") {
  json body = {{"detail", message}};
  if (!field.empty()) body["field"] = field;
  return {status, dump(body)};
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> segments;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) segments.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return segments;
}

std::string sanitized_metadata(const std::string& metadata) {
  std::string out;
  for (char c : metadata) {
    if (out.size() >= 64) break;
    const bool plain =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    out.push_back(plain ? c : '_');
  }
  return out;
}

}  // namespace

ResultLog::ResultLog(const std::filesystem::path& path, std::uint64_t max_bytes)
    : max_bytes_(max_bytes), path_(path.string()) {
  // O_NONBLOCK: a FIFO named by mistake must not block the open; it is refused just below.
  fd_ = ::open(path_.c_str(), O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd_ < 0) {
    throw InputError(fmt::format("--results {}: cannot open for appending: {}", path_, std::strerror(errno)));
  }
  const auto refuse = [&](const std::string& message) {
    ::close(fd_);
    throw InputError(fmt::format("--results {}: {}", path_, message));
  };
  struct stat status {};
  if (::fstat(fd_, &status) != 0 || !S_ISREG(status.st_mode)) refuse("not a regular file");
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) refuse("in use by another kareus serve (flock)");
  (void)::fcntl(fd_, F_SETFL, O_APPEND);  // blocking writes from here on
  size_ = static_cast<std::uint64_t>(status.st_size);
  // Only a results log is appended to (and possibly cut): every line it holds is a JSON object,
  // so a file that does not start with '{' is someone else's and is left alone.
  if (size_ > 0) {
    char first = 0;
    if (::pread(fd_, &first, 1, 0) != 1) refuse("cannot read its first byte");
    if (first != '{') refuse("is not a results log (its lines are JSON objects); it is left as it is");
  }
  // A line torn by a crash of an older writer is cut off, so the next line is not glued to it.
  if (size_ > 0) {
    char last = '\n';
    if (::pread(fd_, &last, 1, static_cast<off_t>(size_ - 1)) != 1) refuse("cannot read its last byte");
    std::uint64_t keep = size_;
    char chunk[4096];
    while (last != '\n' && keep > 0) {
      const std::uint64_t start = keep > sizeof(chunk) ? keep - sizeof(chunk) : 0;
      const ssize_t count = ::pread(fd_, chunk, keep - start, static_cast<off_t>(start));
      if (count != static_cast<ssize_t>(keep - start)) refuse("cannot read it");
      const std::string_view text(chunk, static_cast<std::size_t>(count));
      const std::size_t newline = text.rfind('\n');
      keep = newline == std::string_view::npos ? start : start + newline + 1;
      if (newline != std::string_view::npos) break;
    }
    // A file of one torn line and nothing else is no log this server wrote: refused, not emptied.
    if (keep == 0) refuse("holds no complete line, so it is not a results log; it is left as it is");
    if (keep < size_) {
      if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) refuse("cannot cut off its torn last line");
      dropped_tail_bytes_ = size_ - keep;
      size_ = keep;
    }
  }
}

ResultLog::~ResultLog() {
  if (fd_ >= 0) ::close(fd_);
}

void ResultLog::append(const std::string& line) {
  const std::string whole = line + '\n';
  const std::lock_guard lock(mutex_);
  if (size_ + whole.size() > max_bytes_) {
    throw ResultLogFull(
        fmt::format("--results {} holds {} bytes, and this result of {} bytes would pass its cap of {} "
                    "(--max-results-bytes); the result was not written",
                    path_, size_, whole.size(), max_bytes_));
  }
  std::size_t written = 0;
  while (written < whole.size()) {
    const ssize_t count = ::write(fd_, whole.data() + written, whole.size() - written);
    if (count < 0 && errno == EINTR) continue;
    if (count <= 0) {
      const int code = count < 0 ? errno : ENOSPC;
      // Undo the part that was written: the file keeps whole lines only.
      const bool undone = ::ftruncate(fd_, static_cast<off_t>(size_)) == 0;
      const std::string message =
          fmt::format("--results {}: write failed: {}; the result was not written{}", path_, std::strerror(code),
                      undone ? "" : " (and cutting off its partial line failed too)");
      if (code == ENOSPC || code == EDQUOT || code == EFBIG) throw ResultLogFull(message);
      throw Error(message);
    }
    written += static_cast<std::size_t>(count);
  }
  size_ += whole.size();
}

PfoService::PfoService(std::vector<ServedPlan> frontier, ResultLog* results, PfoServiceLimits limits)
    : frontier_(std::move(frontier)), results_(results), limits_(limits) {
  if (frontier_.empty()) throw InputError("the served frontier has no plans");
  for (const ServedPlan& point : frontier_) {
    std::vector<std::string> frequencies;
    std::vector<std::string> comm;
    for (const plan::StagePlan& stage : point.plan.stages) {
      json list = json::array();
      json instructions = json::array();
      for (const plan::PlannedInstruction& instruction : stage.instructions) {
        list.push_back({kareus::to_string(instruction.type), instruction.freq_mhz});
        json partitions = json::object();
        for (const auto& [key, config] : instruction.partitions) {
          partitions[key] = {{"slot", config.slot}, {"ctas", config.ctas}};
        }
        instructions.push_back({{"type", kareus::to_string(instruction.type)},
                                {"microbatch", instruction.microbatch},
                                {"freq_mhz", instruction.freq_mhz},
                                {"partitions", std::move(partitions)}});
      }
      frequencies.push_back(list.dump());
      comm.push_back(instructions.dump());
    }
    frequencies_json_.push_back(std::move(frequencies));
    comm_json_.push_back(std::move(comm));
  }
}

PfoService::~PfoService() = default;

std::size_t PfoService::job_count() const {
  const std::lock_guard lock(mutex_);
  return jobs_.size();
}

std::size_t PfoService::rank_count() const {
  const std::lock_guard lock(mutex_);
  return rank_count_;
}

PfoService::Job* PfoService::find_job(const std::string& job_id) {
  const auto found = jobs_.find(job_id);
  if (found == jobs_.end()) return nullptr;
  found->second->last_used = ++use_clock_;
  return found->second.get();
}

template <typename Fits>
void PfoService::evict_until(const Job* keep, Fits fits) {
  while (!fits()) {
    auto oldest = jobs_.end();
    for (auto entry = jobs_.begin(); entry != jobs_.end(); ++entry) {
      if (entry->second.get() == keep) continue;
      if (oldest == jobs_.end() || entry->second->last_used < oldest->second->last_used) oldest = entry;
    }
    if (oldest == jobs_.end()) return;
    rank_count_ -= oldest->second->ranks.size();
    jobs_.erase(oldest);
  }
}

HttpResponse PfoService::unknown_job(const std::string& job_id) const {
  return error_response(404, fmt::format("unknown job '{}' (never registered, or forgotten: the server keeps the {} "
                                         "most recently used jobs and {} ranks)",
                                         job_id.substr(0, 128), limits_.max_jobs, limits_.max_ranks));
}

HttpResponse PfoService::handle(const HttpRequest& request) {
  try {
    const std::vector<std::string> segments = split_path(request.path);
    const auto route = [&](std::string_view name, std::size_t size, std::string_view method) {
      return !segments.empty() && segments[0] == name && segments.size() == size &&
             (request.method == method || (method == "GET" && request.method == "HEAD"));
    };
    const auto known = [&](std::string_view name, std::size_t size) {
      return !segments.empty() && segments[0] == name && segments.size() == size;
    };
    if (route("register_job", 1, "POST")) return register_job(request.body);
    if (route("register_rank", 2, "POST")) return register_rank(segments[1], request.body);
    if (route("schedule", 2, "GET")) return schedule(segments[1], request, false);
    if (route("comm_schedule", 2, "GET")) return schedule(segments[1], request, true);
    if (route("deadline", 2, "POST")) return deadline(segments[1], request.body);
    if (route("result", 2, "POST")) return result(segments[1], request.body);
    if (route("info", 1, "GET")) return info();
    for (auto [name, size] : {std::pair<std::string_view, std::size_t>{"register_job", 1},
                              {"register_rank", 2},
                              {"schedule", 2},
                              {"comm_schedule", 2},
                              {"deadline", 2},
                              {"result", 2},
                              {"info", 1}}) {
      if (known(name, size)) {
        return error_response(405, fmt::format("method {} is not allowed on /{}", request.method.substr(0, 16), name));
      }
    }
    return error_response(404, fmt::format("no route {}", request.path.substr(0, 128)));
  } catch (const RequestError& error) {
    return error_response(400, error.what(), error.field());
  } catch (const std::exception& error) {
    return error_response(500, error.what());
  }
}

HttpResponse PfoService::register_job(const std::string& body) {
  const JobInfo info = parse_job_info(body);
  const std::size_t stages = frontier_.front().plan.stages.size();
  if (static_cast<std::size_t>(info.pp_degree) != stages) {
    throw RequestError("pp_degree", fmt::format("field 'pp_degree' must be the served plans' {} pipeline stages, "
                                                "found {}",
                                                stages, info.pp_degree));
  }
  const std::lock_guard lock(mutex_);
  evict_until(nullptr, [&] { return jobs_.size() < limits_.max_jobs; });
  auto job = std::make_unique<Job>();
  job->info = info;
  job->last_used = ++use_clock_;
  job->id = fmt::format("kareus-{}-dp{}-pp{}-tp{}", next_job_++, info.dp_degree, info.pp_degree, info.tp_degree);
  if (info.job_metadata && !info.job_metadata->empty()) job->id += "-" + sanitized_metadata(*info.job_metadata);
  const std::string id = job->id;
  jobs_.emplace(id, std::move(job));
  return {200, dump(json(id))};
}

HttpResponse PfoService::register_rank(const std::string& job_id, const std::string& body) {
  const RankInfo info = parse_rank_info(body);
  const std::lock_guard lock(mutex_);
  Job* found = find_job(job_id);
  if (found == nullptr) return unknown_job(job_id);
  Job& job = *found;
  const JobInfo& shape = job.info;
  const auto check = [](int value, int limit, const char* field, const char* degree) {
    if (value >= limit) {
      throw RequestError(
          field, fmt::format("field '{}' must be below the job's {} {}, found {}", field, degree, limit, value));
    }
  };
  check(info.rank, shape.world_size, "rank", "world_size");
  check(info.dp_rank, shape.dp_degree, "dp_rank", "dp_degree");
  check(info.pp_rank, shape.pp_degree, "pp_rank", "pp_degree");
  check(info.tp_rank, shape.tp_degree, "tp_rank", "tp_degree");
  const auto coordinates = std::make_tuple(info.dp_rank, info.pp_rank, info.tp_rank);
  if (const auto owner = job.coordinates.find(coordinates);
      owner != job.coordinates.end() && owner->second != info.rank) {
    throw RequestError("pp_rank", fmt::format("ranks {} and {} both claim dp_rank {}, pp_rank {}, tp_rank {}",
                                              owner->second, info.rank, info.dp_rank, info.pp_rank, info.tp_rank));
  }
  if (!info.available_frequencies.empty()) {
    const std::set<int> available(info.available_frequencies.begin(), info.available_frequencies.end());
    for (const ServedPlan& point : frontier_) {
      for (const plan::PlannedInstruction& instruction : point.plan.stages[info.pp_rank].instructions) {
        if (!available.contains(instruction.freq_mhz)) {
          throw RequestError("available_frequencies",
                             fmt::format("field 'available_frequencies' lacks {} MHz, which stage {} runs in {}",
                                         instruction.freq_mhz, info.pp_rank, point.path));
        }
      }
    }
  }
  // A rank that registers again (a restarted process) replaces its earlier registration.
  if (const auto previous = job.ranks.find(info.rank); previous != job.ranks.end()) {
    job.coordinates.erase(previous->second);
  } else {
    if (job.ranks.size() + 1 > limits_.max_ranks) {
      return error_response(
          503, fmt::format("job '{}' would hold more than the {} ranks the server keeps", job_id, limits_.max_ranks));
    }
    evict_until(&job, [&] { return rank_count_ < limits_.max_ranks; });
    ++rank_count_;
  }
  job.coordinates[coordinates] = info.rank;
  job.ranks[info.rank] = coordinates;
  return {200, "null"};
}

HttpResponse PfoService::schedule(const std::string& job_id, const HttpRequest& request, bool comm) {
  const auto rank_value = request.query.find("rank");
  const int rank = parse_rank_query(rank_value == request.query.end() ? nullptr : &rank_value->second);
  int stage = 0;
  std::size_t plan_index = 0;
  {
    const std::lock_guard lock(mutex_);
    const Job* found = find_job(job_id);
    if (found == nullptr) return unknown_job(job_id);
    const Job& job = *found;
    if (rank >= job.info.world_size) {
      throw RequestError("rank", fmt::format("query parameter 'rank' must be below the job's world_size {}, found {}",
                                             job.info.world_size, rank));
    }
    const auto registered = job.ranks.find(rank);
    if (registered == job.ranks.end()) {
      return error_response(
          409,
          fmt::format("rank {} has not registered with job '{}' (POST /register_rank/{} first)", rank, job_id, job_id),
          "rank");
    }
    stage = std::get<1>(registered->second);
    plan_index = job.plan_index;
  }
  if (comm) {
    return {200, fmt::format(R"({{"rank":{},"stage":{},"plan_index":{},"instructions":{}}})", rank, stage, plan_index,
                             comm_json_[plan_index][stage])};
  }
  return {200, fmt::format(R"({{"rank":{},"frequencies":{}}})", rank, frequencies_json_[plan_index][stage])};
}

HttpResponse PfoService::deadline(const std::string& job_id, const std::string& body) {
  const double deadline_s = parse_deadline_request(body);
  std::vector<runtime::FrontierPoint> points;
  for (const ServedPlan& point : frontier_) points.push_back({point.time_s, point.energy_j, point.path});
  const runtime::DeadlineChoice choice = runtime::choose_for_deadline(points, deadline_s);
  {
    const std::lock_guard lock(mutex_);
    Job* found = find_job(job_id);
    if (found == nullptr) return unknown_job(job_id);
    found->plan_index = choice.index;
  }
  const ServedPlan& chosen = frontier_[choice.index];
  json answer = {{"plan_index", choice.index},
                 {"time_s", chosen.time_s},
                 {"energy_j", chosen.energy_j},
                 {"meets_deadline", choice.meets_deadline},
                 {"plan", chosen.path}};
  return {200, dump(answer)};
}

HttpResponse PfoService::result(const std::string& job_id, const std::string& body) {
  const ProfilingResult posted = parse_profiling_result(body);
  std::size_t plan_index = 0;
  {
    const std::lock_guard lock(mutex_);
    const Job* found = find_job(job_id);
    if (found == nullptr) return unknown_job(job_id);
    if (posted.rank >= found->info.world_size) {
      throw RequestError("rank", fmt::format("field 'rank' must be below the job's world_size {}, found {}",
                                             found->info.world_size, posted.rank));
    }
    plan_index = found->plan_index;
  }
  if (results_ != nullptr) {
    try {
      results_->append(fmt::format(R"({{"job_id":{},"plan_index":{},"plan":{},"result":{}}})", dump(json(job_id)),
                                   plan_index, dump(json(frontier_[plan_index].path)), posted.json));
    } catch (const ResultLogFull& full) {
      return error_response(507, full.what());
    }
  }
  return {200, "null"};
}

HttpResponse PfoService::info() const {
  json points = json::array();
  for (const ServedPlan& point : frontier_) {
    points.push_back({{"time_s", point.time_s}, {"energy_j", point.energy_j}, {"plan", point.path}});
  }
  json answer = {{"server", "kareus serve"},
                 {"stages", frontier_.front().plan.stages.size()},
                 {"microbatches", frontier_.front().plan.stages.front().instructions.size() / 2},
                 {"frontier", std::move(points)}};
  return {200, dump(answer)};
}

}  // namespace kareus::interop
