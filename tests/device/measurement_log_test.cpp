// Measurement records: JSONL round trips, classes, errors with file and line.
#include "kareus/device/measurement_log.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/input_error.h"
#include "common/scratch.h"
#include "common/workloads.h"
#include "kareus/common/error.h"
#include "kareus/device/profile.h"
#include "kareus/workload/model.h"

namespace kareus::device {
namespace {

using test_common::error_of;
using test_common::llama_3b_15_13;

void expect_same_op(const workload::Op& a, const workload::Op& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.direction, b.direction);
  EXPECT_EQ(a.flops, b.flops);
  EXPECT_EQ(a.bytes_read, b.bytes_read);
  EXPECT_EQ(a.bytes_written, b.bytes_written);
  EXPECT_EQ(a.gemm.m, b.gemm.m);
  EXPECT_EQ(a.gemm.n, b.gemm.n);
  EXPECT_EQ(a.gemm.k, b.gemm.k);
  EXPECT_EQ(a.ring_steps, b.ring_steps);
  ASSERT_EQ(a.collective.has_value(), b.collective.has_value());
  if (a.collective) {
    EXPECT_EQ(a.collective->kind, b.collective->kind);
    EXPECT_EQ(a.collective->group, b.collective->group);
    EXPECT_EQ(a.collective->group_size, b.collective->group_size);
    EXPECT_EQ(a.collective->bytes, b.collective->bytes);
  }
}

MeasurementRecord sample_record() {
  MeasurementRecord record;
  record.backend = "cuda";
  record.gpu = "h200";
  record.device_name = "NVIDIA H200";
  record.workload_json = workload::workload_to_json(llama_3b_15_13());
  record.partition = partition::representative_partition(llama_3b_15_13(), "bwd_attn");
  record.config = {1500, 12, "attn_0"};
  record.time_s = 0.0123456789;
  record.energy_j = 4.56789;
  record.details = {123, 5.01, 1485, 1515, 1500.5, 0x44, 31, 48, 612.5, 1, false};
  return record;
}

TEST(MeasurementLog, LineRoundTripKeepsEveryField) {
  MeasurementRecord record = sample_record();
  int attention_ops = 0;
  for (workload::Op& op : record.partition.compute_ops) {
    if (op.kind != workload::OpKind::kAttention) continue;
    op.ring_steps = 2;  // context parallelism's ring
    ++attention_ops;
  }
  ASSERT_EQ(attention_ops, 1);
  const MeasurementRecord back = parse_measurement_line(to_json_line(record), "test");
  EXPECT_EQ(back.backend, "cuda");
  EXPECT_EQ(back.gpu, "h200");
  EXPECT_EQ(back.device_name, "NVIDIA H200");
  EXPECT_EQ(nlohmann::json::parse(back.workload_json), nlohmann::json::parse(record.workload_json));
  EXPECT_EQ(back.partition.key, "bwd_attn");
  EXPECT_EQ(back.partition.direction, Direction::kBackward);
  EXPECT_EQ(back.partition.nanobatch, record.partition.nanobatch);
  ASSERT_EQ(back.partition.compute_ops.size(), record.partition.compute_ops.size());
  for (std::size_t op = 0; op < record.partition.compute_ops.size(); ++op) {
    expect_same_op(back.partition.compute_ops[op], record.partition.compute_ops[op]);
  }
  ASSERT_TRUE(back.partition.collective);
  expect_same_op(*back.partition.collective, *record.partition.collective);
  ASSERT_EQ(back.partition.slots.size(), record.partition.slots.size());
  for (std::size_t slot = 0; slot < record.partition.slots.size(); ++slot) {
    EXPECT_EQ(back.partition.slots[slot].name, record.partition.slots[slot].name);
    EXPECT_EQ(back.partition.slots[slot].first_op, record.partition.slots[slot].first_op);
  }
  EXPECT_EQ(back.config, record.config);
  EXPECT_DOUBLE_EQ(back.time_s, record.time_s);
  EXPECT_DOUBLE_EQ(back.energy_j, record.energy_j);
  EXPECT_EQ(back.details, record.details);
  EXPECT_EQ(back.kernel_class(), "partition");
  // A second round trip is byte-identical.
  EXPECT_EQ(to_json_line(back), to_json_line(record));
  // Ring steps belong to attention alone: on any other op they are refused, not run.
  nlohmann::json line = nlohmann::json::parse(to_json_line(record));
  nlohmann::json& first = line["ops"][0];
  ASSERT_NE(first["kind"], "attention");
  first["ring_steps"] = 2;
  EXPECT_NE(error_of([&] {
              (void)parse_measurement_line(line.dump(), "m.jsonl:3");
            }).find(fmt::format("op \"{}\": only an attention op has 'ring_steps'", first["name"].get<std::string>())),
            std::string::npos);
}

TEST(MeasurementLog, KernelClassesOfKernelPartitions) {
  std::map<std::string, int> classes;
  for (const partition::Partition& kernel : kernel_partitions(llama_3b_15_13())) {
    MeasurementRecord record;
    record.partition = kernel;
    ++classes[record.kernel_class()];
    EXPECT_EQ(kernel.key.starts_with("collective:"), record.kernel_class() == "collective") << kernel.key;
  }
  EXPECT_GT(classes["gemm"], 0);
  EXPECT_GT(classes["attention"], 0);
  EXPECT_GT(classes["memory_bound"], 0);
  EXPECT_GT(classes["collective"], 0);
  EXPECT_EQ(classes.count("partition"), 0u);
}

TEST(MeasurementLog, FileAppendAndReadBack) {
  const std::filesystem::path path = test_common::scratch_path("kareus_measurement_log_test.jsonl");
  std::filesystem::remove(path);
  MeasurementRecord first = sample_record();
  MeasurementRecord second = sample_record();
  second.config.freq_mhz = 1200;
  append_measurement(path, first);
  append_measurement(path, second);
  { std::ofstream(path, std::ios::app) << "\n"; }  // blank lines are skipped
  const std::vector<MeasurementRecord> records = read_measurements(path);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].config.freq_mhz, 1500);
  EXPECT_EQ(records[1].config.freq_mhz, 1200);
  std::filesystem::remove(path);
}

TEST(MeasurementLog, BadLinesNameFileAndLine) {
  const std::filesystem::path path = test_common::scratch_path("kareus_measurement_log_bad.jsonl");
  {
    std::ofstream file(path);
    file << to_json_line(sample_record()) << "\n";
    file << R"({"schema": "kareus.measurement/1", "backend": "cuda"})"
         << "\n";
  }
  try {
    (void)read_measurements(path);
    FAIL() << "expected InputError";
  } catch (const InputError& error) {
    EXPECT_NE(std::string(error.what()).find(path.string() + ":2: not a kareus.measurement/1 record"),
              std::string::npos)
        << error.what();
  }
  {
    std::ofstream file(path);
    file << R"({"schema": "kareus.frontier/1"})"
         << "\n";
  }
  EXPECT_THROW((void)read_measurements(path), InputError);
  std::filesystem::remove(path);
}

TEST(MeasurementLog, UnknownFieldsAreRefusedNotDropped) {
  nlohmann::json record = nlohmann::json::parse(to_json_line(sample_record()));
  record["energy_mj"] = 5;  // a misspelling of energy_j beside the real one
  EXPECT_NE(error_of([&] {
              (void)parse_measurement_line(record.dump(), "m.jsonl:4");
            }).find("m.jsonl:4: unknown field 'energy_mj' (allowed: schema, backend,"),
            std::string::npos);
  record.erase("energy_mj");
  record["config"]["ctass"] = 3;
  EXPECT_NE(error_of([&] {
              (void)parse_measurement_line(record.dump(), "m.jsonl:4");
            }).find("m.jsonl:4: config: unknown field 'ctass' (allowed: freq_mhz, ctas, slot)"),
            std::string::npos);
  record["config"].erase("ctass");
  EXPECT_EQ(parse_measurement_line(record.dump(), "m.jsonl:4").config.ctas, sample_record().config.ctas);
}

TEST(MeasurementLog, OutOfRangeNumbersNameTheLine) {
  const auto error = [](const MeasurementRecord& record) {
    try {
      (void)parse_measurement_line(to_json_line(record), "m.jsonl:7");
    } catch (const InputError& failure) {
      return std::string(failure.what());
    }
    return std::string("<no InputError>");
  };
  MeasurementRecord record = sample_record();
  record.time_s = 1e308;  // a calibration over it used to "fit" with a 681% error
  EXPECT_EQ(error(record), "m.jsonl:7: field 'time_s' must be a number in [0, 1e+06], found 1e+308");
  record = sample_record();
  record.config.freq_mhz = -900;
  EXPECT_EQ(error(record), "m.jsonl:7: config: field 'freq_mhz' must be an integer in [1, 100000], found -900");
  // An integer past int range is refused, not wrapped by the conversion.
  std::string line = to_json_line(sample_record());
  const std::string ctas = fmt::format("\"ctas\":{}", sample_record().config.ctas);
  ASSERT_NE(line.find(ctas), std::string::npos);
  line.replace(line.find(ctas), ctas.size(), "\"ctas\":4294967304");
  try {
    (void)parse_measurement_line(line, "m.jsonl:8");
    ADD_FAILURE() << "no error";
  } catch (const InputError& failure) {
    EXPECT_STREQ(failure.what(), "m.jsonl:8: config: field 'ctas' must be an integer in [0, 65536], found 4294967304");
  }
  EXPECT_EQ(parse_measurement_line(to_json_line(sample_record()), "m.jsonl:9").origin, "m.jsonl:9");
}

ProfileHeader header_of(const MeasurementRecord& record) {
  ProfileHeader header;
  header.workload_json = record.workload_json;
  header.gpu = record.gpu;
  header.backend = record.backend;
  header.clocks_mhz = {1500, 1200};
  return header;
}

TEST(MeasurementLog, ATornLastLineIsReportedAndNeverGluedToTheNextRecord) {
  // A re-profile after a full disk used to append its first record to the torn fragment, making
  // the whole log unreadable.
  const std::filesystem::path path = test_common::scratch_path("kareus_measurement_log_torn.jsonl");
  const MeasurementRecord record = sample_record();
  const std::string line = to_json_line(record);
  {
    std::ofstream file(path, std::ios::trunc);
    file << to_json_line(header_of(record)) << "\n" << line << "\n" << line.substr(0, 40);
  }
  std::vector<std::string> warnings;
  const auto warn = [&](const std::string& message) { warnings.push_back(message); };
  EXPECT_EQ(read_profile_log(path, warn).records.size(), 1u);  // read: the torn line is skipped
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].rfind(path.string() + ":3: a torn last line", 0), 0u) << warnings[0];
  MeasurementRecord next = record;
  next.config.freq_mhz = 1200;
  append_measurement(path, next);  // resume: cut, then a whole line of its own
  const ProfileLog log = read_profile_log(path);
  ASSERT_EQ(log.records.size(), 2u);
  EXPECT_EQ(log.records[1].config.freq_mhz, 1200);
  EXPECT_EQ(log.records[1].origin, path.string() + ":3");
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace kareus::device
