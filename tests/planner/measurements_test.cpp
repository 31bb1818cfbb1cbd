// Plans from recorded measurements: replay of profile logs through the Device seam.
#include "kareus/planner/measurements.h"

#include <filesystem>
#include <fstream>
#include <optional>

#include <gtest/gtest.h>

#include "../common/input_error.h"
#include "../common/plan_methods.h"
#include "common/scratch.h"
#include "kareus/device/caching_device.h"
#include "kareus/device/emulator.h"
#include "kareus/device/profile.h"
#include "kareus/planner/emulator_devices.h"
#include "kareus/planner/job_devices.h"
#include "kareus/planner/plan_job.h"
#include "kareus/workload/model.h"

namespace kareus::planner {
namespace {

using test_common::error_of;
using test_common::method;

workload::Workload llama(int tp = 8, int cp = 1) {
  workload::Parallelism parallel;
  parallel.tp = tp;
  parallel.cp = cp;
  parallel.microbatches = 4;
  parallel.layers_per_stage = {15, 13};
  return workload::make_workload(workload::load_model("llama3.2-3b"), parallel);
}

PlanJobOptions quick_options() {
  PlanJobOptions options;
  options.clocks_mhz = {1110, 1260, 1410};
  options.space.tp_ctas = {6, 30, 6};
  options.space.cp_ctas = {2, 20, 6};
  // Enough that the baselines' default configs, which the log also holds, add little.
  options.search_budget_fraction = 0.3;
  options.max_plans = 4;
  options.seed = 5;
  return options;
}

/// A `kareus profile --all` log of `workload` in a fresh temporary file.
std::filesystem::path profile_all(const device::GpuSpec& gpu, const workload::Workload& workload,
                                  const PlanJobOptions& options, const std::string& name) {
  const std::filesystem::path path = test_common::scratch_path(name + ".jsonl");
  std::filesystem::remove(path);
  device::ProfileHeader header;
  header.workload_json = workload::workload_to_json(workload);
  header.gpu = gpu.name;
  header.backend = "emulator";
  header.clocks_mhz = options.clocks_mhz;
  device::append_profile_header(path, header);
  device::EmulatedDevice emulator(gpu, {true, options.seed, 5});
  device::ProfileSink sink;
  sink.out = path;
  sink.workload_json = header.workload_json;
  device::RecordingDevice recording(emulator, sink, 0);
  measure_plan_inputs(recording, workload, options, 5);  // kareus profile --all's default
  return path;
}

TEST(ReplayDevice, AnswersTheMeanOfRepeatsAndNamesWhatIsUnmeasured) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama();
  const partition::Partition attn = partition::representative_partition(workload, "fwd_attn");
  device::MeasurementRecord record;
  record.gpu = gpu.name;
  record.partition = attn;
  record.config = {1410, 12, "norm_0"};
  record.time_s = 1.0;
  record.energy_j = 100;
  device::MeasurementRecord again = record;
  again.time_s = 2.0;  // within kMaxRepeatRatio of the first
  again.energy_j = 180;
  device::ReplayDevice replay(gpu, {record, again}, "m.jsonl");
  const device::Measurement mean = replay.measure(attn, {1410, 12, "norm_0"});
  EXPECT_DOUBLE_EQ(mean.time_s, 1.5);
  EXPECT_DOUBLE_EQ(mean.energy_j, 140);
  ASSERT_EQ(replay.measured_configs(attn).size(), 1u);
  EXPECT_EQ(replay.measured_configs(attn).front().count, 2);
  const std::string message = error_of([&] { (void)replay.measure(attn, {1260, 12, "norm_0"}); });
  EXPECT_NE(message.find("m.jsonl: no measurement of fwd_attn at 1260 MHz, 12 CTAs, slot norm_0"), std::string::npos)
      << message;
  const std::string serial = error_of([&] { (void)replay.measure_serial({"serial:layer_forward", {}, 24}, 1410); });
  EXPECT_NE(serial.find("serial:layer_forward"), std::string::npos) << serial;
  EXPECT_NE(serial.find("no record of this key"), std::string::npos) << serial;
}

TEST(ReplayDevice, AnEdgeInstanceIsAnsweredAtTheRepresentativesPlannedSlot) {
  // A first or last layer's instance may lack the representative's leading slot: a plan's
  // slot there launches at the instance's first slot instead, and replay answers with the
  // representative's measurement at the planned slot.
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama();
  std::optional<partition::Partition> edge, representative;
  for (int stage = 0; stage < 2 && !edge; ++stage) {
    for (Direction direction : {Direction::kForward, Direction::kBackward}) {
      for (const partition::Partition& candidate : partition::build_partitions(workload, stage, direction)) {
        if (!candidate.searchable() || edge) continue;
        partition::Partition typical = partition::representative_partition(workload, candidate.key);
        if (!candidate.find_slot(typical.slots.front().name)) {
          edge = candidate;
          representative = std::move(typical);
        }
      }
    }
  }
  ASSERT_TRUE(edge.has_value()) << "no instance lacks its representative's first slot";
  const std::string planned = representative->slots.front().name;
  device::MeasurementRecord record;
  record.gpu = gpu.name;
  record.partition = *representative;
  record.config = {1410, 12, planned};
  record.time_s = 0.25;
  record.energy_j = 40;
  device::ReplayDevice replay(gpu, {record}, "m.jsonl");
  const device::Measurement answer = replay.measure(*edge, {1410, 12, edge->slots.front().name});
  EXPECT_DOUBLE_EQ(answer.time_s, 0.25);
  // A non-searchable partition is never stood in for.
  partition::Partition trail = *edge;
  trail.key = trail.direction == Direction::kForward ? "fwd_trail" : "bwd_trail";
  EXPECT_THROW((void)replay.measure(trail, {1410, 12, edge->slots.front().name}), device::UnmeasuredError);
}

TEST(ReplayDevice, RefusesRepeatsThatDisagreeAndRecordsNoGpuCouldMake) {
  // One repeat 1000x slower used to be averaged in: the fastest plan went from 4.7 s to 2373 s.
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const partition::Partition attn = partition::representative_partition(llama(), "fwd_attn");
  device::MeasurementRecord record;
  record.gpu = gpu.name;
  record.partition = attn;
  record.config = {1410, 12, "norm_0"};
  record.time_s = 0.004;
  record.energy_j = 0.8;  // 200 W
  record.origin = "m.jsonl:2";
  const auto changed = [&](double time_s, double energy_j, const char* origin) {
    device::MeasurementRecord copy = record;
    copy.time_s = time_s;
    copy.energy_j = energy_j;
    copy.origin = origin;
    return copy;
  };
  struct Row {
    device::MeasurementRecord second;
    std::string message;
  };
  const Row rows[] = {
      {changed(4.0, 800, "m.jsonl:9"),
       "m.jsonl:9: fwd_attn at 1410 MHz, 12 CTAs, slot 'norm_0' measured 4 s, 800 J; m.jsonl:2 measured it 0.004 s, "
       "0.8 J: repeats of one measurement must agree within 2x, so one of the two lines is wrong (remove it)"},
      {changed(5e-7, 1e-4, "m.jsonl:9"),
       "m.jsonl:9: time_s 5e-07 of fwd_attn is under 1e-06 s, shorter than anything measurable"},
      {changed(0.004, 40, "m.jsonl:9"),
       "m.jsonl:9: energy_j / time_s = 1e+04 W for fwd_attn is outside [6, 800] W (a tenth of the a100-40gb's "
       "idle power, twice its power limit)"},
      {changed(0.004, 0.004, "m.jsonl:9"),
       "m.jsonl:9: energy_j / time_s = 1 W for fwd_attn is outside [6, 800] W (a tenth of the a100-40gb's idle "
       "power, twice its power limit)"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.message);
    EXPECT_EQ(error_of([&] { device::ReplayDevice replay(gpu, {record, row.second}, "m.jsonl"); }), row.message);
  }
  device::MeasurementRecord h100 = record;
  h100.gpu = "h100-sxm";
  EXPECT_EQ(error_of([&] { device::ReplayDevice replay(gpu, {h100}, "m.jsonl"); }),
            "m.jsonl:2: the record was measured on gpu h100-sxm, the plan is for a100-40gb");
  // A clock the A100 does not have (its grid is 15 MHz steps) was replayed as if measured.
  device::MeasurementRecord off_grid = record;
  off_grid.config.freq_mhz = 1141;
  EXPECT_EQ(error_of([&] { device::ReplayDevice replay(gpu, {off_grid}, "m.jsonl"); }),
            "m.jsonl:2: freq_mhz 1141: a100-40gb supports 210..1410 MHz in 15 MHz steps");
  // Within the bound both count, averaged.
  device::ReplayDevice replay(gpu, {record, changed(0.006, 1.0, "m.jsonl:9")}, "m.jsonl");
  EXPECT_DOUBLE_EQ(replay.measure(attn, {1410, 12, "norm_0"}).time_s, 0.005);
}

TEST(LoadMeasurements, RefusesRecordsOfAnotherWorkloadOrGpuThanTheHeader) {
  // Records marked seq 2048 / h100 under a seq 4096 / a100 header used to replay as the header's,
  // planning a job twice as fast as it is.
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama();
  workload::Workload shorter = workload;
  shorter.parallel.seq = 2048;
  device::MeasurementRecord good;
  good.backend = "emulator";
  good.gpu = gpu.name;
  good.workload_json = workload::workload_to_json(workload);
  good.partition = partition::representative_partition(workload, "fwd_attn");
  good.config = {1410, 12, "norm_0"};
  good.time_s = 0.004;
  good.energy_j = 0.8;
  device::MeasurementRecord other_seq = good;
  other_seq.workload_json = workload::workload_to_json(shorter);
  device::MeasurementRecord other_gpu = good;
  other_gpu.gpu = "h100-sxm";
  device::ProfileHeader header;
  header.workload_json = good.workload_json;
  header.gpu = gpu.name;
  header.backend = "emulator";
  header.clocks_mhz = {1410};
  const std::filesystem::path path = test_common::scratch_path("kareus_mixed_records.jsonl");
  struct Row {
    device::MeasurementRecord record;
    std::string message;
  };
  const Row rows[] = {
      {other_seq, path.string() + ":3: made for seq 2048, this run has seq 4096"},
      {other_gpu, path.string() + ":3: the record was measured on gpu h100-sxm, the plan is for a100-40gb"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.message);
    {
      std::ofstream file(path, std::ios::trunc);
      file << device::to_json_line(header) << "\n"
           << device::to_json_line(good) << "\n"
           << device::to_json_line(row.record) << "\n";
    }
    EXPECT_EQ(error_of([&] { (void)load_measurements({path}, gpu, workload); }), row.message);
  }
  std::filesystem::remove(path);
}

TEST(CachingDevice, MeasuresEachDistinctWorkRepeatsTimes) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  device::EmulatedDevice noisy(gpu, {true, 3, 5});
  device::CachingDevice cached(noisy, 4);
  const workload::Workload workload = llama();
  const device::InstructionRun first =
      device::run_instruction(cached, workload, 0, Direction::kForward, 1410, device::OverlapMode::kNanobatch);
  const std::size_t measured = cached.inner_measurements();
  // 15 layers x 2 nanobatches of 2 keys, but only a handful of distinct pieces of work.
  EXPECT_LT(measured, 4u * 10);
  EXPECT_EQ(measured % 4, 0u);
  const device::InstructionRun second =
      device::run_instruction(cached, workload, 0, Direction::kForward, 1410, device::OverlapMode::kNanobatch);
  EXPECT_EQ(cached.inner_measurements(), measured);
  EXPECT_DOUBLE_EQ(first.time_s, second.time_s);
  // The mean of 4 noisy repeats is within a few noise sigmas of the exact run.
  device::EmulatedDevice exact = device::exact_emulator(gpu);
  const device::InstructionRun truth =
      device::run_instruction(exact, workload, 0, Direction::kForward, 1410, device::OverlapMode::kNanobatch);
  EXPECT_NEAR(first.time_s / truth.time_s, 1, 0.02);
}

TEST(PlanFromMeasurements, MatchesThePlanOnTheEmulatorWithinOnePercent) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama();
  const PlanJobOptions options = quick_options();
  const std::filesystem::path log = profile_all(gpu, workload, options, "kareus_plan_from_measurements");
  device::ReplayDevice replay = load_measurements({log}, gpu, workload);
  const PlanJobResult measured = run_plan_job({replay, replay, &replay, {log.string()}}, workload, options);
  EmulatorDevices emulator(gpu, options.seed);
  const PlanJobResult emulated = run_plan_job(emulator.devices(), workload, options);
  for (const std::string name : {"megatron", "perseus", "nanobatch_perseus", "kareus"}) {
    SCOPED_TRACE(name);
    const MethodPoint& from_log = method(measured, name).frontier.front();
    const MethodPoint& from_emulator = method(emulated, name).frontier.front();
    EXPECT_NEAR(from_log.time_s / from_emulator.time_s, 1, 0.01);
    EXPECT_NEAR(from_log.energy_j / from_emulator.energy_j, 1, 0.01);
  }
  // The searched keys were not measured again: the kareus measurements are the logged ones.
  for (const KeySearch& search : measured.searches) EXPECT_EQ(search.clock_fill, 0u);
  std::filesystem::remove(log);
}

TEST(PlanFromMeasurements, AMissingKeyOrAnotherWorkloadIsNamed) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama();
  PlanJobOptions options = quick_options();
  options.methods = {Method::kKareus};
  const std::filesystem::path log = profile_all(gpu, workload, options, "kareus_plan_missing_key");
  // Drop every record of fwd_mlp.
  std::ifstream in(log);
  std::string text, line;
  while (std::getline(in, line)) {
    if (line.find("\"partition\":\"fwd_mlp\"") == std::string::npos) text += line + "\n";
  }
  in.close();
  std::ofstream(log) << text;
  device::ReplayDevice replay = load_measurements({log}, gpu, workload);
  const std::string missing = error_of([&] { (void)run_plan_job({replay, replay, &replay, {}}, workload, options); });
  EXPECT_NE(missing.find("partition fwd_mlp"), std::string::npos) << missing;

  const std::string other = error_of([&] { (void)load_measurements({log}, gpu, llama(4, 1)); });
  EXPECT_EQ(other, log.string() + ": made for tp 8, this run has tp 4");
  const std::string other_gpu =
      error_of([&] { (void)load_measurements({log}, device::load_gpu("h100-sxm"), workload); });
  EXPECT_EQ(other_gpu, log.string() + R"(: made for gpu "a100-40gb", this run has gpu "h100-sxm")");
  std::filesystem::remove(log);
}

TEST(JobDevices, BuildsTheChosenSourceAndRefusesWhatCannotBeCombined) {
  const device::GpuSpec gpu = device::load_gpu("a100-40gb");
  const workload::Workload workload = llama();
  const partition::Partition attn = partition::representative_partition(workload, "fwd_attn");
  const partition::KnobConfig config{1410, 12, attn.slots.front().name};
  DeviceChoice choice;
  choice.seed = 5;
  {
    const JobDevices emulator(choice, gpu, workload);
    EXPECT_EQ(emulator.devices().sources, std::vector<std::string>{"emulator"});
    EXPECT_EQ(emulator.devices().measurements, nullptr);
    // The plans run on the exact model; the search measures it with seeded noise.
    device::EmulatedDevice exact = device::exact_emulator(gpu);
    EXPECT_DOUBLE_EQ(emulator.devices().execution.measure(attn, config).time_s, exact.measure(attn, config).time_s);
    EXPECT_NE(emulator.devices().search.measure(attn, config).time_s, exact.measure(attn, config).time_s);
  }
  const std::filesystem::path log = profile_all(gpu, workload, quick_options(), "kareus_job_devices");
  choice.measurements = {log.string()};
  {
    const JobDevices logged(choice, gpu, workload);
    EXPECT_EQ(logged.devices().sources, choice.measurements);
    ASSERT_NE(logged.devices().measurements, nullptr);
    device::ReplayDevice replay = load_measurements({log}, gpu, workload);
    const partition::KnobConfig logged_config = replay.measured_configs(attn).front().config;
    EXPECT_DOUBLE_EQ(logged.devices().execution.measure(attn, logged_config).energy_j,
                     replay.measure(attn, logged_config).energy_j);
  }
  choice.backend = "cuda";
  EXPECT_EQ(error_of([&] { JobDevices devices(choice, gpu, workload); }),
            "--measurements plans from logs alone: drop --backend");
  choice.measurements.clear();
  EXPECT_EQ(error_of([&] { JobDevices devices(choice, gpu, workload); }),
            "--backend cuda needs --log FILE (measurements are logged as they are made)");
  choice.backend = "tpu";
  EXPECT_EQ(error_of([&] { JobDevices devices(choice, gpu, workload); }), "--backend tpu: expected emulator or cuda");
  std::filesystem::remove(log);
}

}  // namespace
}  // namespace kareus::planner
