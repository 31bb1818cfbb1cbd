#include "kareus/runtime/kareus_runtime.h"

#include <string>

#include <gtest/gtest.h>

#include "kareus/common/error.h"
#include "kareus/runtime/runtime.h"
#include "test_plans.h"

namespace kareus::runtime {
namespace {

TEST(CApi, DrivesAWholeStepAndAnswersCommConfigs) {
  const auto path = testing::write_plan_file("c_api.json", testing::make_plan(2, 3));
  kareus_runtime_options options = kareus_runtime_default_options();
  options.plan_path = path.c_str();
  options.rank = 5;  // tp 2, dp 2: ranks 4..7 are stage 1
  options.tp = 2;
  options.dp = 2;
  options.pp = 2;
  kareus_runtime* runtime = nullptr;
  ASSERT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_OK) << kareus_last_error();
  int stage = -1;
  ASSERT_EQ(kareus_runtime_stage(runtime, &stage), KAREUS_OK);
  EXPECT_EQ(stage, 1);
  ASSERT_EQ(kareus_runtime_on_step_begin(runtime), KAREUS_OK);
  for (const auto& instruction : pipeline::one_f_one_b(1, 2, 3)) {
    const bool forward = instruction.type == Direction::kForward;
    ASSERT_EQ(kareus_runtime_on_instruction_begin(runtime, forward ? KAREUS_FORWARD : KAREUS_BACKWARD,
                                                  instruction.microbatch),
              KAREUS_OK)
        << kareus_last_error();
    int ctas = 0;
    const char* slot = nullptr;
    ASSERT_EQ(kareus_runtime_comm_config(runtime, forward ? "fwd_attn" : "bwd_attn", &ctas, &slot), KAREUS_OK);
    EXPECT_EQ(ctas, testing::planned_ctas(1, instruction.type, instruction.microbatch));
    EXPECT_STREQ(slot, forward ? "linear_0" : "linear_1");
    ASSERT_EQ(kareus_runtime_on_instruction_end(runtime), KAREUS_OK);
  }
  ASSERT_EQ(kareus_runtime_on_step_end(runtime), KAREUS_OK);
  EXPECT_STREQ(kareus_last_error(), "");
  kareus_runtime_free(runtime);
}

// Interleaved 1F1B (2 stages x 2 chunks x 4 microbatches): every instruction is found by its
// chunk (the comm config differs per chunk and microbatch), and another chunk is refused by name.
TEST(CApi, DrivesAnInterleavedStepByChunk) {
  constexpr int kStages = 2, kChunks = 2, kMicrobatches = 4;
  const auto ctas_of = [](Direction type, int microbatch, int chunk) {
    return 4 + 10 * chunk + microbatch + (type == Direction::kBackward ? 50 : 0);
  };
  plan::Plan interleaved;
  interleaved.predicted_time_s = 2.5;
  interleaved.predicted_energy_j = 9000;
  for (int stage = 0; stage < kStages; ++stage) {
    plan::StagePlan stage_plan{stage, {}};
    for (const auto& instruction : pipeline::interleaved_one_f_one_b(stage, kStages, kChunks, kMicrobatches)) {
      plan::PlannedInstruction planned{instruction.type,
                                       instruction.microbatch,
                                       1980 - 15 * instruction.chunk,
                                       workload::OverlapMode::kNanobatch,
                                       {},
                                       instruction.chunk};
      const int ctas = ctas_of(instruction.type, instruction.microbatch, instruction.chunk);
      planned.partitions[instruction.type == Direction::kForward ? "fwd_attn" : "bwd_attn"] = {"linear_0", ctas};
      if (instruction.type == Direction::kBackward) planned.partitions["fwd_attn"] = {"linear_0", ctas};
      stage_plan.instructions.push_back(planned);
    }
    interleaved.stages.push_back(stage_plan);
  }
  const auto path = testing::write_plan_file("c_api_interleaved.json", interleaved);
  kareus_runtime_options options = kareus_runtime_default_options();
  options.plan_path = path.c_str();
  options.rank = 1;
  options.pp = kStages;
  kareus_runtime* runtime = nullptr;
  ASSERT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_OK) << kareus_last_error();
  ASSERT_EQ(kareus_runtime_on_step_begin(runtime), KAREUS_OK);
  const auto order = pipeline::interleaved_one_f_one_b(1, kStages, kChunks, kMicrobatches);
  ASSERT_EQ(order.size(), 2u * kChunks * kMicrobatches);
  for (const auto& instruction : order) {
    const bool forward = instruction.type == Direction::kForward;
    ASSERT_EQ(kareus_runtime_on_chunk_instruction_begin(runtime, forward ? KAREUS_FORWARD : KAREUS_BACKWARD,
                                                        instruction.microbatch, instruction.chunk),
              KAREUS_OK)
        << kareus_last_error();
    int ctas = 0;
    const char* slot = nullptr;
    ASSERT_EQ(kareus_runtime_comm_config(runtime, forward ? "fwd_attn" : "bwd_attn", &ctas, &slot), KAREUS_OK);
    EXPECT_EQ(ctas, ctas_of(instruction.type, instruction.microbatch, instruction.chunk));
    ASSERT_EQ(kareus_runtime_on_instruction_end(runtime), KAREUS_OK);
  }
  ASSERT_EQ(kareus_runtime_on_step_end(runtime), KAREUS_OK);

  // Stage 1 starts with microbatch 0's forward on chunk 0; chunk 1 there is refused by name, and
  // so is the chunk-less call of a microbatch that is not next.
  ASSERT_EQ(kareus_runtime_on_step_begin(runtime), KAREUS_OK);
  EXPECT_EQ(kareus_runtime_on_chunk_instruction_begin(runtime, KAREUS_FORWARD, 0, 1), KAREUS_INPUT_ERROR);
  EXPECT_STREQ(kareus_last_error(), "stage 1: expected forward microbatch 0 chunk 0, got forward microbatch 0 chunk 1");
  EXPECT_EQ(kareus_runtime_on_chunk_instruction_begin(runtime, KAREUS_FORWARD, -1, 0), KAREUS_INPUT_ERROR);
  EXPECT_STREQ(
      kareus_last_error(),
      "kareus_runtime_on_chunk_instruction_begin: microbatch and chunk must be >= 0, found microbatch -1 chunk 0");
  EXPECT_EQ(kareus_runtime_on_chunk_instruction_begin(runtime, 3, 0, 0), KAREUS_INPUT_ERROR);
  EXPECT_STREQ(kareus_last_error(), "instruction type must be KAREUS_FORWARD or KAREUS_BACKWARD, found 3");
  EXPECT_EQ(kareus_runtime_on_chunk_instruction_begin(nullptr, KAREUS_FORWARD, 0, 0), KAREUS_INVALID_ARGUMENT);
  kareus_runtime_free(runtime);
}

TEST(CApi, ErrorsBecomeStatusesAndMessages) {
  const auto path = testing::write_plan_file("c_api_errors.json", testing::make_plan(2, 2));
  kareus_runtime_options options = kareus_runtime_default_options();
  options.plan_path = path.c_str();
  options.pp = 2;
  options.rank = 2;
  kareus_runtime* runtime = reinterpret_cast<kareus_runtime*>(0x1);
  EXPECT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_INPUT_ERROR);
  EXPECT_EQ(runtime, nullptr);
  EXPECT_STREQ(kareus_last_error(), "rank 2 is out of range: world size is 2 (tp 1 x cp 1 x pp 2 x dp 1)");

  options.rank = 0;
  options.clock_backend = "nvml:/nonexistent/libnvidia-ml.so.1";
  EXPECT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_FAILURE);
  EXPECT_NE(std::string(kareus_last_error()).find("no NVIDIA driver found"), std::string::npos);

  options.clock_backend = nullptr;
  options.pp = 3;
  EXPECT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_INPUT_ERROR);
  EXPECT_NE(std::string(kareus_last_error()).find(": made for pp 2, this run has pp 3"), std::string::npos);

  options.pp = 2;
  ASSERT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_OK);
  EXPECT_EQ(kareus_runtime_on_step_begin(runtime), KAREUS_OK);
  EXPECT_EQ(kareus_runtime_on_instruction_begin(runtime, KAREUS_BACKWARD, 0), KAREUS_INPUT_ERROR);
  EXPECT_STREQ(kareus_last_error(), "stage 0: expected forward microbatch 0, got backward microbatch 0");
  EXPECT_EQ(kareus_runtime_on_instruction_begin(runtime, 7, 0), KAREUS_INPUT_ERROR);
  EXPECT_STREQ(kareus_last_error(), "instruction type must be KAREUS_FORWARD or KAREUS_BACKWARD, found 7");
  EXPECT_EQ(kareus_runtime_switch_plan(runtime, path.c_str()), KAREUS_INPUT_ERROR);
  EXPECT_NE(std::string(kareus_last_error()).find("mid-step"), std::string::npos);
  int ctas = 0;
  const char* slot = nullptr;
  EXPECT_EQ(kareus_runtime_comm_config(runtime, nullptr, &ctas, &slot), KAREUS_INVALID_ARGUMENT);
  EXPECT_STREQ(kareus_last_error(), "partition_key is NULL");
  EXPECT_EQ(kareus_runtime_on_step_begin(nullptr), KAREUS_INVALID_ARGUMENT);
  kareus_runtime_free(runtime);
  kareus_runtime_free(nullptr);
}

TEST(CApi, SwitchForDeadlinePicksTheFrontierPoint) {
  plan::Plan fast = testing::make_plan(2, 2);
  plan::Plan slow = testing::make_plan(2, 2);
  for (auto& instruction : slow.stages[0].instructions) instruction.freq_mhz = 1005;
  const auto fast_path = testing::write_plan_file("deadline_fast.json", fast);
  (void)testing::write_plan_file("deadline_slow.json", slow);
  const auto frontier_path = fast_path.parent_path() / "deadline_frontier.json";
  write_file_atomic(frontier_path, R"({"schema": "kareus.frontier/1", "points": [
      {"time_s": 1.0, "energy_j": 500, "plan": "deadline_fast.json"},
      {"time_s": 1.3, "energy_j": 400, "plan": "deadline_slow.json"}]})");
  kareus_runtime_options options = kareus_runtime_default_options();
  options.plan_path = fast_path.c_str();
  options.pp = 2;
  kareus_runtime* runtime = nullptr;
  ASSERT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_OK) << kareus_last_error();
  int meets = -1;
  ASSERT_EQ(kareus_runtime_switch_for_deadline(runtime, frontier_path.c_str(), 0.5, &meets), KAREUS_OK);
  EXPECT_EQ(meets, 0);  // nothing is that fast: the fastest plan, flagged
  ASSERT_EQ(kareus_runtime_switch_for_deadline(runtime, frontier_path.c_str(), 1.5, &meets), KAREUS_OK);
  EXPECT_EQ(meets, 1);
  ASSERT_EQ(kareus_runtime_on_step_begin(runtime), KAREUS_OK);
  ASSERT_EQ(kareus_runtime_on_instruction_begin(runtime, KAREUS_FORWARD, 0), KAREUS_OK);
  ASSERT_EQ(kareus_runtime_flush(runtime), KAREUS_OK);
  EXPECT_EQ(kareus_runtime_switch_for_deadline(runtime, frontier_path.c_str(), 1.5, nullptr), KAREUS_INPUT_ERROR);
  EXPECT_STREQ(kareus_last_error(), "stage 0: switch_for_deadline called mid-step; switch between steps");
  EXPECT_EQ(kareus_runtime_switch_for_deadline(nullptr, frontier_path.c_str(), 1.5, nullptr), KAREUS_INVALID_ARGUMENT);
  kareus_runtime_free(runtime);
}

TEST(Runtime, AppliesEachInstructionsClockInOrder) {
  auto plan = std::make_shared<const plan::Plan>(testing::make_plan(2, 4));
  auto recorder = std::make_shared<RecorderClockBackend>();
  {
    Runtime runtime(plan, 0, std::make_unique<testing::ForwardingBackend>(recorder));
    std::vector<int> expected;
    runtime.on_step_begin();
    for (const auto& instruction : pipeline::one_f_one_b(0, 2, 4)) {
      // Zeus-style: only the type; the runtime infers the microbatch.
      runtime.on_instruction_begin(instruction.type, std::nullopt);
      const int clock = testing::planned_clock_mhz(0, instruction.type, instruction.microbatch);
      if (expected.empty() || expected.back() != clock) expected.push_back(clock);
      runtime.on_instruction_end();
    }
    runtime.on_step_end();
    runtime.flush();
    std::vector<int> requested;
    for (const auto& sample : runtime.timeline()) {
      requested.push_back(sample.requested_mhz);
      EXPECT_EQ(sample.effective_mhz, sample.requested_mhz);  // all on the recorder's grid
    }
    EXPECT_EQ(requested, expected);
  }
  EXPECT_EQ(recorder->locked_clock_mhz(), std::nullopt);  // reset when the runtime went away
}

TEST(CApi, RefusesAPlanWhoseClocksOrCtasTheGpuLacks) {
  // The recorder stands for a GPU of 210..1980 MHz in 15 MHz steps; NVML and kareusd report the real list.
  struct Case {
    int freq_mhz;
    int ctas;
    std::string message;
  };
  const std::string where = ": stage 0 instruction 1 (forward microbatch 1): ";
  for (const Case& bad : {Case{1411, 5,
                               where + "freq_mhz 1411 is not a clock of the GPU behind recorder (210..1980 "
                                       "MHz in 15 MHz steps)"},
                          Case{1000000000, 5,
                               where + "freq_mhz 1000000000 is not a clock of the GPU behind recorder "
                                       "(210..1980 MHz in 15 MHz steps)"},
                          Case{1410, 1000000000,
                               where + "partition 'fwd_attn': ctas 1000000000 is outside 1..65536 "
                                       "(kareus's CTA limit)"}}) {
    plan::Plan bad_plan = testing::make_plan(2, 2);
    bad_plan.stages[0].instructions[1].freq_mhz = bad.freq_mhz;
    bad_plan.stages[0].instructions[1].partitions["fwd_attn"].ctas = bad.ctas;
    const auto path = testing::write_plan_file("c_api_bad_clock.json", bad_plan);
    kareus_runtime_options options = kareus_runtime_default_options();
    options.plan_path = path.c_str();
    options.pp = 2;
    kareus_runtime* runtime = nullptr;
    EXPECT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_INPUT_ERROR);
    EXPECT_EQ(runtime, nullptr);
    EXPECT_EQ(std::string(kareus_last_error()), path.string() + bad.message);

    // Switching to it is refused too, and the running plan stays.
    const auto good = testing::write_plan_file("c_api_good_clock.json", testing::make_plan(2, 2));
    options.plan_path = good.c_str();
    ASSERT_EQ(kareus_runtime_init(&options, &runtime), KAREUS_OK) << kareus_last_error();
    EXPECT_EQ(kareus_runtime_switch_plan(runtime, path.c_str()), KAREUS_INPUT_ERROR);
    EXPECT_EQ(std::string(kareus_last_error()), path.string() + bad.message);
    kareus_runtime_free(runtime);
  }
}

TEST(Runtime, SwitchRefusesAnotherWorkloadsPlan) {
  // A 4-microbatch plan in an 8-microbatch job used to be accepted and die midway through the
  // next step; it is refused at the switch, naming the field.
  plan::Plan running = testing::make_plan(2, 8);
  running.workload_json = R"({"model": "llama3.2-3b", "pp": 2, "microbatches": 8})";
  plan::Plan other = testing::make_plan(2, 4);
  other.workload_json = R"({"model": "llama3.2-3b", "pp": 2, "microbatches": 4})";
  const auto other_path = testing::write_plan_file("other_workload.json", other);
  Runtime runtime(std::make_shared<const plan::Plan>(running), 0, std::make_unique<RecorderClockBackend>());
  try {
    runtime.switch_plan(other_path);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_EQ(std::string(error.what()),
              other_path.string() + ": made for microbatches 4, this run has microbatches 8");
  }
  plan::Plan same = testing::make_plan(2, 8);
  same.workload_json = running.workload_json;
  same.stages[0].instructions[0].freq_mhz = 1005;
  runtime.switch_plan(std::make_shared<const plan::Plan>(same));  // another point of the same workload switches
  EXPECT_EQ(runtime.cursor().plan().stages[0].instructions[0].freq_mhz, 1005);
}

}  // namespace
}  // namespace kareus::runtime
