#include "kareus/search/pareto.h"

#include <algorithm>
#include <cassert>

#include "kareus/common/pareto.h"

namespace kareus::search {

std::string_view to_string(Objective objective) {
  return objective == Objective::kEnergy ? "energy" : "effective_energy";
}

ObjectivePoint objective_point(const Evaluation& evaluation, double static_power_w, Objective objective) {
  const double energy_j =
      objective == Objective::kEnergy ? evaluation.energy_j : evaluation.energy_j - static_power_w * evaluation.time_s;
  return {evaluation.time_s, energy_j};
}

std::vector<Evaluation> pareto_front(std::vector<Evaluation> evaluations, double static_power_w, Objective objective) {
  return pareto_filter(
      std::move(evaluations), [](const Evaluation& one) { return one.time_s; },
      [&](const Evaluation& one) { return objective_point(one, static_power_w, objective).energy_j; });
}

double hypervolume(std::vector<ObjectivePoint> points, ObjectivePoint reference) {
  std::erase_if(points, [&](const ObjectivePoint& point) {
    return !(point.time_s < reference.time_s && point.energy_j < reference.energy_j);
  });
  // Sweep the front by time: each point adds the strip between its energy and the previous
  // point's (the reference's for the first), from its time to the reference.
  double area = 0;
  double ceiling = reference.energy_j;
  for (const ObjectivePoint& point : pareto_filter(
           std::move(points), [](const ObjectivePoint& one) { return one.time_s; },
           [](const ObjectivePoint& one) { return one.energy_j; })) {
    area += (reference.time_s - point.time_s) * (ceiling - point.energy_j);
    ceiling = point.energy_j;
  }
  return area;
}

double hypervolume(const std::vector<Evaluation>& evaluations, double static_power_w, Objective objective,
                   ObjectivePoint reference) {
  std::vector<ObjectivePoint> points;
  points.reserve(evaluations.size());
  for (const Evaluation& evaluation : evaluations) {
    points.push_back(objective_point(evaluation, static_power_w, objective));
  }
  return hypervolume(std::move(points), reference);
}

ObjectivePoint reference_point(const std::vector<Evaluation>& evaluations, double static_power_w, Objective objective) {
  assert(!evaluations.empty() && "reference_point needs evaluations");
  ObjectivePoint worst = objective_point(evaluations.front(), static_power_w, objective);
  for (const Evaluation& evaluation : evaluations) {
    const ObjectivePoint point = objective_point(evaluation, static_power_w, objective);
    worst.time_s = std::max(worst.time_s, point.time_s);
    worst.energy_j = std::max(worst.energy_j, point.energy_j);
  }
  return {1.1 * worst.time_s, 1.1 * worst.energy_j};
}

}  // namespace kareus::search
