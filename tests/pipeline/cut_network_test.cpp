// The minimum-cut network of one PD iteration (src/pipeline/cut_network.h) on hand-made
// critical sub-DAGs whose minimum cuts are worked out below.
#include "pipeline/cut_network.h"

#include <vector>

#include <gtest/gtest.h>

namespace kareus::pipeline::detail {
namespace {

ExecutionOption option(double time_s, double effective_energy_j) {
  return {time_s, effective_energy_j, effective_energy_j, 0, 0};
}

// Operations with options at integer times (unit 1 s) and the given edges.
PipelineDag dag_of(const std::vector<std::vector<ExecutionOption>>& options,
                   const std::vector<std::pair<int, int>>& edges) {
  PipelineDag dag;
  dag.stages = 1;
  dag.unit_time_s = 1;
  for (int op = 0; op < static_cast<int>(options.size()); ++op) {
    dag.specs.emplace_back(options[op], dag.unit_time_s);
    dag.operations.push_back({OperationKind::kInstruction, {}, op});
  }
  dag.edges = edges;
  return dag;
}

// Plans `duration` on `dag`, marks what has no float, builds the network and solves it.
struct Planned {
  std::vector<std::int64_t> duration, start, latest_finish;
  std::vector<int> critical, compact;
  std::int64_t makespan = 0;

  Planned(const Topology& topology, std::vector<std::int64_t> durations) : duration(std::move(durations)) {
    const int count = static_cast<int>(duration.size());
    start.resize(count);
    latest_finish.resize(count);
    auto of = [&](int op) { return duration[op]; };
    makespan = forward_pass<std::int64_t>(topology, start, of);
    latest_finish_pass<std::int64_t>(topology, latest_finish, makespan, of);
    compact.assign(count, -1);
    for (int op = 0; op < count; ++op) {
      if (start[op] + duration[op] != latest_finish[op]) continue;
      compact[op] = static_cast<int>(critical.size());
      critical.push_back(op);
    }
  }
  [[nodiscard]] CriticalSubDag sub() const { return {critical, compact, duration, start, latest_finish, makespan}; }
};

enum class Side { kNone, kShorten, kLengthen };
std::vector<Side> cut_of(const CutNetwork& network, const Planned& planned, int count) {
  std::vector<Side> sides(count, Side::kNone);
  for (int k = 0; k < static_cast<int>(planned.critical.size()); ++k) {
    if (network.forward_cut(k)) sides[planned.critical[k]] = Side::kShorten;
    if (network.backward_cut(k)) sides[planned.critical[k]] = Side::kLengthen;
  }
  return sides;
}

// Paths A -> C, B -> D and A -> M -> D, every one 6 s long. Shortening A or D costs 1 J a
// unit, B or C 5 J; M is at its fastest but saves 0.5 J a unit slower. Cuts that shorten every
// path: {A, B} 6, {C, D} 6, {C, M, B} inf (M cannot shorten), {A, D} 2, and {A, D} with M
// lengthened: A -> M -> D still shortens by one unit (-1 + 1 - 1), for 2 - 0.5 = 1.5 J, the
// minimum.
enum { kA, kB, kC, kD, kM };
PipelineDag crossing_paths() {
  return dag_of({{option(1, 11), option(2, 10)},
                 {option(3, 15), option(4, 10)},
                 {option(3, 15), option(4, 10)},
                 {option(1, 11), option(2, 10)},
                 {option(2, 10), option(3, 9.5)}},
                {{kA, kC}, {kB, kD}, {kA, kM}, {kM, kD}});
}

TEST(CutNetwork, MinimumCutLengthensTheCrossingOperation) {
  const PipelineDag dag = crossing_paths();
  const Topology topology(dag);
  const Planned planned(topology, {2, 4, 4, 2, 2});
  ASSERT_EQ(planned.makespan, 6);
  ASSERT_EQ(planned.critical.size(), 5U);
  CutNetwork network(dag, topology);
  network.build(planned.sub());
  EXPECT_FALSE(network.at_minimum_time());
  network.solve();
  EXPECT_EQ(cut_of(network, planned, 5),
            (std::vector<Side>{Side::kShorten, Side::kNone, Side::kNone, Side::kShorten, Side::kLengthen}));
}

TEST(CutNetwork, WithoutTheSavingNoBackwardArcIsCut) {
  // M's slower option saves nothing: {A, D} alone (2 J) is the minimum, M stays.
  PipelineDag dag = crossing_paths();
  dag.specs[kM] = CandidateExecutionOptions({option(2, 10)}, 1);
  const Topology topology(dag);
  const Planned planned(topology, {2, 4, 4, 2, 2});
  CutNetwork network(dag, topology);
  network.build(planned.sub());
  network.solve();
  EXPECT_EQ(cut_of(network, planned, 5),
            (std::vector<Side>{Side::kShorten, Side::kNone, Side::kNone, Side::kShorten, Side::kNone}));
}

TEST(CutNetwork, WarmStartedSolveFindsTheColdCut) {
  // A solve started from another network's flow finds what a fresh network finds: with A and D
  // at their fastest, the cut is {B, C} (10 J) and M is not cut (it has float: A -> M -> D is
  // 1 + 2 + 1 s against 1 + 4 s).
  const PipelineDag dag = crossing_paths();
  const Topology topology(dag);
  CutNetwork warm(dag, topology);
  warm.build(Planned(topology, {2, 4, 4, 2, 2}).sub());
  warm.solve();
  const Planned next(topology, {1, 4, 4, 1, 2});
  ASSERT_EQ(next.makespan, 5);
  warm.build(next.sub());
  warm.solve();
  CutNetwork cold(dag, topology);
  cold.build(next.sub());
  cold.solve();
  const std::vector<Side> expected = {Side::kNone, Side::kShorten, Side::kShorten, Side::kNone, Side::kNone};
  EXPECT_EQ(cut_of(warm, next, 5), expected);
  EXPECT_EQ(cut_of(cold, next, 5), expected);
}

TEST(CutNetwork, CriticalPathAtItsFastestIsTheMinimumTime) {
  const PipelineDag dag = dag_of({{option(1, 11), option(2, 10)}, {option(3, 15), option(4, 10)}}, {{0, 1}});
  const Topology topology(dag);
  CutNetwork network(dag, topology);
  network.build(Planned(topology, {1, 4}).sub());
  EXPECT_FALSE(network.at_minimum_time());
  network.build(Planned(topology, {1, 3}).sub());
  EXPECT_TRUE(network.at_minimum_time());
}

TEST(TightDependency, NoFloatBetweenTheOperations) {
  const std::vector<std::int64_t> duration = {2, 3}, start = {0, 2}, latest_finish = {2, 5};
  EXPECT_TRUE(tight_dependency({0, 1}, duration, start, latest_finish));
  const std::vector<std::int64_t> late_finish = {3, 6};
  EXPECT_FALSE(tight_dependency({0, 1}, duration, start, late_finish));
}

}  // namespace
}  // namespace kareus::pipeline::detail
