// Shared by the tests of every module: workloads several test files build alike.
#pragma once

#include "kareus/workload/model.h"
#include "kareus/workload/workload.h"

namespace kareus::test_common {

/// Llama 3.2 3B with the artifact's 15/13 layer split over two stages, CP `cp` and TP `tp`, the
/// default parallelism otherwise (PP 2, microbatch 8, sequence 4096).
inline workload::Workload llama_3b_15_13(int cp = 1, int tp = 8) {
  workload::Parallelism parallel;
  parallel.cp = cp;
  parallel.tp = tp;
  parallel.layers_per_stage = {15, 13};
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

}  // namespace kareus::test_common
