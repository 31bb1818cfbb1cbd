#include "plans_within.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <thread>

#include "kareus/common/evenly_spread.h"
#include "kareus/planner/solved_plan.h"

namespace kareus::planner {
namespace {

constexpr int kTries = 3;
// Each deadline after the first sits this far (relative) below what the overshoot seen last
// asks, so that a plan overshooting by a hair more than the last one still runs within.
constexpr double kMargin = 1e-4;

// One time being searched for: its deadline for the solver and the plan found by it.
struct Ask {
  double time_s = 0;
  double deadline_s = 0;
  std::vector<int> seed;
  std::vector<int> found;
};

// Each ask's search (pipeline::cheapest_plan_by from its seed), on as many threads as cores.
void search_all(const pipeline::PipelineDag& dag, int gpus, std::vector<Ask>& asks) {
  if (asks.empty()) return;
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t k = next++; k < asks.size(); k = next++) {
      asks[k].found = pipeline::cheapest_plan_by(dag, gpus, {asks[k].seed}, asks[k].deadline_s, kSearchWork);
    }
  };
  const std::size_t threads = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, asks.size());
  std::vector<std::future<void>> running;
  for (std::size_t t = 1; t < threads; ++t) running.push_back(std::async(std::launch::async, work));
  work();
  for (std::future<void>& thread : running) thread.get();  // rethrows a search's exception
}

}  // namespace

std::vector<MethodPoint> plans_within(const pipeline::PipelineDag& dag, const pipeline::PhillipsDessoukyResult& solved,
                                      int gpus, std::vector<double> times_s, const RunPlan& run) {
  std::sort(times_s.begin(), times_s.end());
  times_s.erase(std::unique(times_s.begin(), times_s.end()), times_s.end());
  std::vector<MethodPoint> points;
  std::vector<Ask> asks;
  for (const double time_s : times_s) {
    const int by = frontier_position_by(solved, time_s);
    if (by < 0) continue;
    MethodPoint point = run(solved.options_of(solved.frontier[by]));
    // Its overshoot (achieved over predicted time) sets the first deadline.
    asks.push_back({time_s, time_s * point.predicted_time_s / point.time_s, {}, {}});
    points.push_back(std::move(point));
  }
  if (asks.size() > kMaxSearchedTimes) {
    std::vector<Ask> spread;
    for (const std::size_t k : evenly_spread_positions(asks.size(), kMaxSearchedTimes)) spread.push_back(asks[k]);
    asks = std::move(spread);
  }
  for (int attempt = 0; attempt < kTries && !asks.empty(); ++attempt) {
    std::erase_if(asks, [&](Ask& ask) {
      const int seed = frontier_position_by(solved, ask.deadline_s);
      if (seed >= 0) ask.seed = solved.options_of(solved.frontier[seed]);
      return seed < 0;
    });
    search_all(dag, gpus, asks);
    std::erase_if(asks, [&](Ask& ask) {
      if (ask.found.empty()) return true;
      points.push_back(run(ask.found));
      const double achieved_s = points.back().time_s;
      if (achieved_s <= ask.time_s) return true;
      ask.deadline_s *= ask.time_s / achieved_s * (1 - kMargin);
      return false;
    });
  }
  return points;
}

}  // namespace kareus::planner
