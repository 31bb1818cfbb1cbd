#include "kareus/device/gpu_spec.h"

#include <algorithm>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include "common/input_error.h"

#include "kareus/common/embedded_data.h"
#include "kareus/common/error.h"

namespace kareus::device {
namespace {

using kareus::test_common::error_of;

nlohmann::ordered_json a100_document() {
  return nlohmann::ordered_json::parse(std::string(*find_embedded_file("gpus/a100-40gb.json")));
}

TEST(GpuPreset, EveryPresetParsesUnderItsOwnName) {
  EXPECT_EQ(gpu_preset_names(), (std::vector<std::string>{"a100-40gb", "h100-sxm", "h200"}));
  for (const std::string& name : gpu_preset_names()) {
    SCOPED_TRACE(name);
    const GpuSpec gpu = load_gpu(name);
    EXPECT_EQ(gpu.name, name);
    EXPECT_FALSE(gpu.description.empty());
    EXPECT_TRUE(gpu.supports_clock(gpu.clock_max_mhz));
    EXPECT_TRUE(gpu.supports_clock(gpu.clock_default_mhz));
    EXPECT_LE(gpu.static_power_w, gpu.power_limit_w);
    EXPECT_LE(gpu.default_comm_ctas, gpu.sm_count);
  }
}

// docs/kareus.md section 8: peaks derived from FLOP per clock per SM, never stored.
TEST(GpuSpec, PeakFlopsMatchSpecSheets) {
  struct Row {
    std::string name;
    int sms;
    double freq_mhz, tflops, tolerance;
  };
  const Row rows[] = {
      {"a100-40gb", 108, 1410, 312, 0.005},
      {"h100-sxm", 132, 1830, 989, 0.005},  // NVIDIA quotes Hopper's dense bf16 at 1830 MHz
      {"h200", 132, 1830, 989, 0.005},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.name);
    const GpuSpec gpu = load_gpu(row.name);
    EXPECT_EQ(gpu.sm_count, row.sms);
    EXPECT_NEAR(gpu.peak_flops(row.freq_mhz, gpu.sm_count) / 1e12 / row.tflops, 1.0, row.tolerance);
  }
  // CUDA cores (the memory-bound ops' FLOPs): FP32 19.5 TFLOP/s on A100, 67 on H100/H200 SXM.
  EXPECT_NEAR(load_gpu("a100-40gb").peak_flops(1410, 108) * load_gpu("a100-40gb").cuda_core_flop_fraction / 1e12, 19.5,
              0.1);
  EXPECT_NEAR(load_gpu("h100-sxm").peak_flops(1830, 132) * load_gpu("h100-sxm").cuda_core_flop_fraction / 1e12, 67,
              0.5);
  const GpuSpec a100 = load_gpu("a100-40gb");
  EXPECT_EQ(a100.clock_max_mhz, 1410);
  EXPECT_NEAR(a100.peak_flops(a100.clock_max_mhz, a100.sm_count) / 312e12, 1.0, 0.005);
  // Peak scales with clock and SMs: half the SMs at half the clock is a quarter.
  EXPECT_DOUBLE_EQ(a100.peak_flops(705, 54), a100.peak_flops(1410, 108) / 4);
}

TEST(GpuSpec, SupportedClocksAreTheHardwareGrid) {
  const GpuSpec a100 = load_gpu("a100-40gb");
  const std::vector<int> clocks = a100.supported_clocks_mhz();
  ASSERT_EQ(clocks.size(), 81u);  // 210..1410 in 15 MHz steps
  EXPECT_EQ(clocks.front(), 210);
  EXPECT_EQ(clocks.back(), 1410);
  EXPECT_TRUE(a100.supports_clock(1395));
  EXPECT_FALSE(a100.supports_clock(1400));
  EXPECT_FALSE(a100.supports_clock(1425));
  EXPECT_FALSE(a100.supports_clock(195));
}

TEST(GpuSpec, VoltageIsFlatThenLinear) {
  const GpuSpec a100 = load_gpu("a100-40gb");
  EXPECT_DOUBLE_EQ(a100.voltage_v(900), a100.voltage_min_v);
  EXPECT_DOUBLE_EQ(a100.voltage_v(a100.voltage_knee_mhz), a100.voltage_min_v);
  EXPECT_DOUBLE_EQ(a100.voltage_v(1410), a100.voltage_max_v);
  const double middle = (a100.voltage_knee_mhz + 1410) / 2.0;
  EXPECT_DOUBLE_EQ(a100.voltage_v(middle), (a100.voltage_min_v + a100.voltage_max_v) / 2);
}

TEST(ClockLists, ArtifactAndRange) {
  const GpuSpec a100 = load_gpu("a100-40gb");
  std::vector<int> artifact;
  for (int clock = 900; clock <= 1410; clock += 30) artifact.push_back(clock);
  EXPECT_EQ(artifact_clocks(a100), artifact);  // 18 clocks, docs/kareus.md section 3
  EXPECT_EQ(clocks_in_range(a100, 900, 1410, 30, "--clocks"), artifact);
  EXPECT_EQ(clocks_in_range(a100, 1410, 1410, 15, "--clocks"), std::vector<int>{1410});
  // A step past the range's end stops at MIN, without overflowing.
  EXPECT_EQ(clocks_in_range(a100, 1410, 1410, 2147483647, "--clocks"), std::vector<int>{1410});
  const GpuSpec h100 = load_gpu("h100-sxm");
  const std::vector<int> hopper = artifact_clocks(h100);
  EXPECT_EQ(hopper.size(), 18u);
  EXPECT_EQ(hopper.back(), 1980);
}

TEST(ClockLists, BadOrUnsupportedClocksNameTheFlag) {
  const GpuSpec a100 = load_gpu("a100-40gb");
  struct Row {
    int min_mhz, max_mhz, step_mhz;
    std::string message;
  };
  const Row rows[] = {
      {1410, 900, 30, "--clocks 1410:900:30: expected MIN:MAX:STEP"},
      {900, 1410, 0, "--clocks 900:1410:0: expected"},
      {900, 1410, -30, "--clocks 900:1410:-30: expected"},
      {905, 1410, 30, "--clocks 905: a100-40gb supports 210..1410 MHz in 15 MHz steps"},
      {1380, 1500, 30, "--clocks 1440: a100-40gb supports 210..1410 MHz"},
  };
  for (const Row& row : rows) {
    SCOPED_TRACE(row.message);
    const std::string message =
        error_of([&] { (void)clocks_in_range(a100, row.min_mhz, row.max_mhz, row.step_mhz, "--clocks"); });
    EXPECT_NE(message.find(row.message), std::string::npos) << message;
  }
  EXPECT_NE(error_of([&] { require_supported_clock(a100, 1400, "--freq"); }).find("--freq 1400"), std::string::npos);
}

TEST(LoadGpu, UnknownNameNamesFlagAndListsPresets) {
  const std::string message = error_of([] { (void)load_gpu("v100"); });
  EXPECT_NE(message.find("--gpu v100"), std::string::npos) << message;
  EXPECT_NE(message.find("a100-40gb, h100-sxm, h200"), std::string::npos) << message;
  EXPECT_NE(error_of([] { (void)load_gpu("/no/such/gpu.json"); }).find("/no/such/gpu.json"), std::string::npos);
}

TEST(ParseGpu, MalformedPresetNamesTheField) {
  struct Row {
    std::string what;
    std::function<void(nlohmann::ordered_json&)> change;
    std::string message;
  };
  const Row rows[] = {
      {"missing source", [](auto& d) { d["parameters"]["sm_count"].erase("source"); },
       "g.json: parameters.sm_count: missing field 'source'"},
      {"empty source", [](auto& d) { d["parameters"]["hbm_efficiency"]["source"] = ""; },
       "g.json: parameters.hbm_efficiency: 'source' must say where the value comes from"},
      {"missing parameter", [](auto& d) { d["parameters"].erase("power_limit_w"); },
       "g.json: parameters: missing field 'power_limit_w'"},
      {"out of range", [](auto& d) { d["parameters"]["gemm_efficiency"]["value"] = 1.5; },
       "g.json: parameters.gemm_efficiency must be a number in [0.01, 1], found 1.5"},
      {"negative", [](auto& d) { d["parameters"]["static_power_w"]["value"] = -85; },
       "parameters.static_power_w must be a number in"},
      {"string value", [](auto& d) { d["parameters"]["link_efficiency"]["value"] = "0.78"; },
       "parameters.link_efficiency must be a number"},
      {"fractional int", [](auto& d) { d["parameters"]["sm_count"]["value"] = 107.5; },
       "g.json: parameters.sm_count must be an integer in [1, 100000], found 107.5"},
      {"unknown parameter",
       [](auto& d) {
         d["parameters"]["warp_speed"] = {{"value", 9}, {"source", "[E]"}};
       },
       "g.json: parameters: unknown field 'warp_speed'"},
      {"unknown top-level", [](auto& d) { d["vendor"] = "nvidia"; }, "g.json: unknown field 'vendor'"},
      {"unknown entry key", [](auto& d) { d["parameters"]["sm_count"]["unit"] = "SMs"; },
       "g.json: parameters.sm_count: unknown field 'unit'"},
      {"missing name", [](auto& d) { d.erase("name"); }, "g.json: missing field 'name'"},
      {"ragged clock range", [](auto& d) { d["parameters"]["clock_max_mhz"]["value"] = 1400; },
       "clock range 210..1400 MHz is not a whole number of 15 MHz steps"},
      {"unsupported default clock", [](auto& d) { d["parameters"]["clock_default_mhz"]["value"] = 1400; },
       "clock_default_mhz 1400"},
      {"inverted voltages", [](auto& d) { d["parameters"]["voltage_max_v"]["value"] = 0.6; },
       "voltage_max_v 0.6 is below voltage_min_v 0.66"},
      {"static power over the limit", [](auto& d) { d["parameters"]["static_power_w"]["value"] = 450; },
       "g.json: static_power_w 450 W is not below power_limit_w 400 W"},
      {"idle power at the limit", [](auto& d) { d["parameters"]["idle_power_w"]["value"] = 400; },
       "g.json: idle_power_w 400 W is not below power_limit_w 400 W"},
      {"too many comm CTAs", [](auto& d) { d["parameters"]["default_comm_ctas"]["value"] = 200; },
       "default_comm_ctas 200 exceeds sm_count 108"},
  };
  EXPECT_EQ(parse_gpu(a100_document().dump(), "g.json").sm_count, 108);
  for (const Row& row : rows) {
    SCOPED_TRACE(row.what);
    nlohmann::ordered_json document = a100_document();
    row.change(document);
    const std::string message = error_of([&] { (void)parse_gpu(document.dump(2), "g.json"); });
    EXPECT_NE(message.find(row.message), std::string::npos) << message;
  }
}

TEST(ParseGpu, BadJsonNamesFileAndLine) {
  std::string text = a100_document().dump(2);
  // Drop the comma after the first parameter's entry: the parser stops at the next key, on line 9.
  const std::size_t comma = text.find("},\n    \"clock_min_mhz\"");
  ASSERT_NE(comma, std::string::npos);
  text.erase(comma + 1, 1);
  const std::size_t line = 1 + std::count(text.begin(), text.begin() + text.find("\"clock_min_mhz\""), '\n');
  const std::string message = error_of([&] { (void)parse_gpu(text, "g.json"); });
  EXPECT_NE(message.find("g.json:" + std::to_string(line) + ":"), std::string::npos) << message;
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
  EXPECT_NE(error_of([] { (void)parse_gpu("{\n\"name\": \"x\",\n", "h.json"); }).find("h.json:3:"), std::string::npos);
}

}  // namespace
}  // namespace kareus::device
