#include "kareus/interop/pfo_service.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/interop/pfo_protocol.h"
#include "kareus/runtime/deadline.h"

namespace kareus::interop {

using nlohmann::json;

struct PfoService::Job {
  std::string id;
  JobInfo info;
  std::size_t plan_index = 0;
  std::map<int, RankInfo> ranks;                         ///< by global rank
  std::map<std::tuple<int, int, int>, int> coordinates;  ///< (dp, pp, tp) -> global rank
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

ResultLog::ResultLog(const std::filesystem::path& path) : path_(path.string()) {
  file_ = std::fopen(path_.c_str(), "a");
  if (file_ == nullptr) {
    throw InputError(fmt::format("--results {}: cannot open for appending: {}", path_, std::strerror(errno)));
  }
}

ResultLog::~ResultLog() {
  if (file_ != nullptr) std::fclose(file_);
}

void ResultLog::append(const std::string& line) {
  const std::lock_guard lock(mutex_);
  if (std::fputs(line.c_str(), file_) < 0 || std::fputc('\n', file_) == EOF || std::fflush(file_) != 0) {
    throw Error(fmt::format("{}: write failed: {}", path_, std::strerror(errno)));
  }
}

PfoService::PfoService(std::vector<ServedPlan> frontier, ResultLog* results, std::size_t max_jobs)
    : frontier_(std::move(frontier)), results_(results), max_jobs_(max_jobs) {
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
  if (jobs_.size() >= max_jobs_) return error_response(503, fmt::format("the server holds {} jobs already", max_jobs_));
  auto job = std::make_unique<Job>();
  job->info = info;
  job->id = fmt::format("kareus-{}-dp{}-pp{}-tp{}", next_job_++, info.dp_degree, info.pp_degree, info.tp_degree);
  if (info.job_metadata && !info.job_metadata->empty()) job->id += "-" + sanitized_metadata(*info.job_metadata);
  const std::string id = job->id;
  jobs_.emplace(id, std::move(job));
  return {200, dump(json(id))};
}

HttpResponse PfoService::register_rank(const std::string& job_id, const std::string& body) {
  const RankInfo info = parse_rank_info(body);
  const std::lock_guard lock(mutex_);
  const auto found = jobs_.find(job_id);
  if (found == jobs_.end()) return error_response(404, fmt::format("unknown job '{}'", job_id.substr(0, 128)));
  Job& job = *found->second;
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
    job.coordinates.erase(
        std::make_tuple(previous->second.dp_rank, previous->second.pp_rank, previous->second.tp_rank));
  }
  job.coordinates[coordinates] = info.rank;
  job.ranks[info.rank] = info;
  return {200, "null"};
}

HttpResponse PfoService::schedule(const std::string& job_id, const HttpRequest& request, bool comm) {
  const auto rank_value = request.query.find("rank");
  const int rank = parse_rank_query(rank_value == request.query.end() ? nullptr : &rank_value->second);
  int stage = 0;
  std::size_t plan_index = 0;
  {
    const std::lock_guard lock(mutex_);
    const auto found = jobs_.find(job_id);
    if (found == jobs_.end()) return error_response(404, fmt::format("unknown job '{}'", job_id.substr(0, 128)));
    const Job& job = *found->second;
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
    stage = registered->second.pp_rank;
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
    const auto found = jobs_.find(job_id);
    if (found == jobs_.end()) return error_response(404, fmt::format("unknown job '{}'", job_id.substr(0, 128)));
    found->second->plan_index = choice.index;
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
    const auto found = jobs_.find(job_id);
    if (found == jobs_.end()) return error_response(404, fmt::format("unknown job '{}'", job_id.substr(0, 128)));
    if (posted.rank >= found->second->info.world_size) {
      throw RequestError("rank", fmt::format("field 'rank' must be below the job's world_size {}, found {}",
                                             found->second->info.world_size, posted.rank));
    }
    plan_index = found->second->plan_index;
  }
  if (results_ != nullptr) {
    results_->append(fmt::format(R"({{"job_id":{},"plan_index":{},"plan":{},"result":{}}})", dump(json(job_id)),
                                 plan_index, dump(json(frontier_[plan_index].path)), posted.json));
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
