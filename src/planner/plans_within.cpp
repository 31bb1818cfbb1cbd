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

// Frontier plans simulated, at most, to find the slowest one that runs within a time.
constexpr int kProbes = 3;

// One time being searched for: its deadline for the solver, the frontier plan the search starts
// from (its position; -1: the plan by the deadline), and the plan found.
struct Ask {
  double time_s = 0;
  double deadline_s = 0;
  int seed_position = -1;
  std::vector<int> seed;
  std::vector<int> found;
};

// Runs the frontier plan at `position` (kept in `points`): its achieved and predicted times.
struct Run {
  double achieved_s = 0;
  double predicted_s = 0;
};
Run run_frontier_plan(const pipeline::PhillipsDessoukyResult& solved, int position, const RunPlan& run,
                      std::vector<MethodPoint>& points) {
  points.push_back(run(solved.options_of(solved.frontier[position])));
  return {points.back().time_s, points.back().predicted_time_s};
}

// The ask for `time_s`. Overshoots differ from plan to plan (more clock switches, more latency),
// so when the frontier's plan by the time runs past it, a bisection (kProbes plans at most) from
// the plan by the deadline its overshoot leaves finds the slowest frontier plan known to run
// within: the search starts there, by the deadline that plan's own overshoot leaves.
Ask ask_for(const pipeline::PhillipsDessoukyResult& solved, double time_s, const RunPlan& run,
            std::vector<MethodPoint>& points) {
  const int by = frontier_position_by(solved, time_s);
  if (by < 0) return {};
  const Run last = run_frontier_plan(solved, by, run, points);
  const double deadline_s = time_s * last.predicted_s / last.achieved_s;
  if (last.achieved_s <= time_s) return {time_s, deadline_s, by, {}, {}};
  Ask ask{time_s, deadline_s, -1, {}, {}};  // from the plan by the deadline, unless one slower fits
  int within = frontier_position_by(solved, deadline_s);
  if (within < 0 || within >= by) return ask;
  Run fits = run_frontier_plan(solved, within, run, points);
  if (fits.achieved_s > time_s) return ask;
  for (int probe = 1, past = by; probe < kProbes && past - within > 1; ++probe) {
    const int middle = within + (past - within) / 2;
    const Run tried = run_frontier_plan(solved, middle, run, points);
    if (tried.achieved_s > time_s) {
      past = middle;
    } else {
      within = middle;
      fits = tried;
    }
  }
  ask.seed_position = within;
  ask.deadline_s = time_s * fits.predicted_s / fits.achieved_s;
  return ask;
}

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
    if (Ask ask = ask_for(solved, time_s, run, points); ask.time_s > 0) asks.push_back(std::move(ask));
  }
  if (asks.size() > kMaxSearchedTimes) {
    std::vector<Ask> spread;
    for (const std::size_t k : evenly_spread_positions(asks.size(), kMaxSearchedTimes)) spread.push_back(asks[k]);
    asks = std::move(spread);
  }
  for (int attempt = 0; attempt < kTries && !asks.empty(); ++attempt) {
    std::erase_if(asks, [&](Ask& ask) {
      if (ask.seed_position < 0) ask.seed_position = frontier_position_by(solved, ask.deadline_s);
      if (ask.seed_position >= 0) ask.seed = solved.options_of(solved.frontier[ask.seed_position]);
      return ask.seed_position < 0;
    });
    search_all(dag, gpus, asks);
    std::erase_if(asks, [&](Ask& ask) {
      if (ask.found.empty()) return true;
      points.push_back(run(ask.found));
      const double achieved_s = points.back().time_s;
      if (achieved_s <= ask.time_s) return true;
      ask.deadline_s *= ask.time_s / achieved_s * (1 - kMargin);
      ask.seed_position = -1;  // the plan by the new deadline
      return false;
    });
  }
  return points;
}

}  // namespace kareus::planner
