// Shared by the planner tests: one method's result out of a plan job's.
#pragma once

#include <stdexcept>
#include <string>

#include "kareus/planner/plan_job.h"

namespace kareus::test_common {

/// The result of the method named `name` (as to_string spells it); throws when it is absent.
inline const planner::MethodResult& method(const planner::PlanJobResult& result, const std::string& name) {
  for (const planner::MethodResult& candidate : result.methods) {
    if (to_string(candidate.method) == name) return candidate;
  }
  throw std::logic_error("no method " + name);
}

}  // namespace kareus::test_common
