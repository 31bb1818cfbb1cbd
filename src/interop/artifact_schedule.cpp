#include "kareus/interop/artifact_schedule.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "kareus/common/error.h"
#include "kareus/common/file_io.h"
#include "kareus/common/pareto.h"
#include "kareus/partition/partition.h"
#include "kareus/plan/frontier.h"
#include "kareus/plan/plan_fit.h"
#include "python_literal.h"

namespace kareus::interop {
namespace {

using detail::PyValue;

constexpr int kThreadsPerCta = 1024;
constexpr int kMaxFreqMhz = 100'000;

std::string join(const std::vector<std::string>& items) { return fmt::format("{}", fmt::join(items, ", ")); }

std::vector<std::string> keys_of(const ArtifactKeyLayout& layout, Direction type) {
  if (type == Direction::kForward) return layout.forward_keys;
  std::vector<std::string> keys = layout.recompute_keys;
  keys.insert(keys.end(), layout.backward_keys.begin(), layout.backward_keys.end());
  return keys;
}

std::string py_quoted(std::string_view text) { return fmt::format("'{}'", text); }

std::string config_string(const partition::CommConfig& config) {
  return fmt::format("{}-none-{}-{}", config.slot, config.ctas, kThreadsPerCta);
}

/// How an instruction a kareus plan runs without nanobatching appears in a scheds file: every
/// collective launched after all compute ('none'), i.e. not overlapped. kareus never plans the
/// 'none' slot, so import reads it back as not nanobatched (the artifact would still split the
/// microbatch, with nothing overlapped).
constexpr std::string_view kNotOverlappedConfig = "none-none-20-1024";

std::string entry_text(Direction type, const std::vector<std::string>& keys,
                       const plan::PlannedInstruction& instruction) {
  const bool nanobatched = plan::effective_overlap(instruction) == workload::OverlapMode::kNanobatch;
  std::string text = "(" + py_quoted(kareus::to_string(type));
  for (const std::string& key : keys) {
    text += ", " + py_quoted(nanobatched ? config_string(instruction.partitions.at(key)) : kNotOverlappedConfig);
  }
  return text + ")";
}

// ---- import helpers ----

struct Origin {
  std::string_view file;
  [[noreturn]] void fail(const PyValue& at, const std::string& what) const {
    throw InputError(fmt::format("{}:{}: {}", file, at.line, what));
  }
};

const PyValue& expect(const Origin& origin, const PyValue& value, PyValue::Kind kind, std::string_view where) {
  if (value.kind != kind) {
    origin.fail(value, fmt::format("{}: expected a {}, found a {}", where, detail::kind_name(kind),
                                   detail::kind_name(value.kind)));
  }
  return value;
}

Direction instruction_type(const Origin& origin, const PyValue& value, std::string_view where) {
  expect(origin, value, PyValue::Kind::kString, where);
  for (const Direction direction : {Direction::kForward, Direction::kBackward}) {
    if (value.string_value == kareus::to_string(direction)) return direction;
  }
  origin.fail(value,
              fmt::format("{}: instruction must be 'forward' or 'backward', found '{}'", where, value.string_value));
}

/// One "<start slot>-none-<CTAs>-1024" string of `key`, checked by `rules` (partition/comm_fit.h).
partition::CommConfig parse_config(const Origin& origin, const PyValue& value, const std::string& key,
                                   const partition::InstructionCommRules& rules, std::string_view where) {
  const std::string context = fmt::format("{} ({})", where, key);
  expect(origin, value, PyValue::Kind::kString, context);
  const std::string& text = value.string_value;
  const auto bad = [&](const std::string& why) {
    origin.fail(value, fmt::format("{}: bad comm config '{}': {}", context, text, why));
  };
  // "<start slot>-<end slot>-<CTAs>-<threads>"; slot names never hold '-'.
  const std::size_t threads_dash = text.rfind('-');
  const std::size_t ctas_dash =
      threads_dash == std::string::npos || threads_dash == 0 ? std::string::npos : text.rfind('-', threads_dash - 1);
  const std::size_t end_dash = ctas_dash == std::string::npos ? std::string::npos : text.find('-');
  if (ctas_dash == std::string::npos || end_dash >= ctas_dash) {
    bad("expected '<start slot>-<end slot>-<CTAs>-<threads per CTA>'");
  }
  const std::string slot = text.substr(0, end_dash);
  const std::string end_slot = text.substr(end_dash + 1, ctas_dash - end_dash - 1);
  const auto number = [&](std::size_t begin, std::size_t end, std::string_view what) {
    int result = 0;
    const char* first = text.data() + begin;
    const char* last = text.data() + end;
    const auto parsed = std::from_chars(first, last, result);
    if (begin == end || parsed.ec != std::errc() || parsed.ptr != last) bad(fmt::format("{} is not an integer", what));
    return result;
  };
  const int ctas = number(ctas_dash + 1, threads_dash, "the CTA count");
  const int threads = number(threads_dash + 1, text.size(), "the threads per CTA");
  if (!slot.empty() && std::all_of(slot.begin(), slot.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    bad("integer overlap windows (the artifact's older format) are not supported; use slot names");
  }
  if (end_slot != "none") bad(fmt::format("the end slot must be 'none' (the partition's end), found '{}'", end_slot));
  if (threads != kThreadsPerCta) bad(fmt::format("threads per CTA must be {}, found {}", kThreadsPerCta, threads));
  const partition::CommConfig config{slot, ctas};
  rules.check_config(key, config, {}, fmt::format("{}:{}: {}", origin.file, value.line, where));
  return config;
}

/// "# Iteration N predicted time_s: X" -> X for `name` ("time_s" / "energy_j"); 0 when absent.
double predicted_figure(std::string_view text, std::string_view name, std::string_view origin) {
  const std::string marker = fmt::format(" predicted {}: ", name);
  std::size_t line_start = 0;
  int line = 1;
  while (line_start < text.size()) {
    std::size_t line_end = text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = text.size();
    const std::string_view content = text.substr(line_start, line_end - line_start);
    if (content.starts_with("# Iteration ")) {
      if (const std::size_t at = content.find(marker); at != std::string_view::npos) {
        std::string_view number = content.substr(at + marker.size());
        while (!number.empty() && (number.back() == '\r' || number.back() == ' ')) number.remove_suffix(1);
        double value = 0;
        const auto parsed = std::from_chars(number.data(), number.data() + number.size(), value);
        if (parsed.ec != std::errc() || parsed.ptr != number.data() + number.size() || !std::isfinite(value) ||
            value < 0) {
          throw InputError(
              fmt::format("{}:{}: predicted {} must be a non-negative number, found '{}'", origin, line, name, number));
        }
        return value;
      }
    }
    line_start = line_end + 1;
    ++line;
  }
  return 0;
}

int number_of(const std::filesystem::path& path, std::string_view prefix, std::string_view suffix) {
  const std::string name = path.filename().string();
  if (!name.starts_with(prefix) || !name.ends_with(suffix) || name.size() <= prefix.size() + suffix.size()) return -1;
  const std::string_view digits =
      std::string_view(name).substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  int number = 0;
  const auto parsed = std::from_chars(digits.data(), digits.data() + digits.size(), number);
  if (parsed.ec != std::errc() || parsed.ptr != digits.data() + digits.size() || digits.size() > 5) return -1;
  return number;
}

}  // namespace

ArtifactKeyLayout artifact_key_layout(const workload::Workload& workload) {
  ArtifactKeyLayout layout;
  if (workload.parallel.cp == 1) {
    layout.forward_keys = {"fwd_attn", "fwd_mlp"};
    layout.backward_keys = {"bwd_attn", "bwd_mlp"};
  } else {
    layout.forward_keys = {"fwd_qkv_ar", "fwd_qkv_ag", "fwd_ao_ag", "fwd_ao_ar", "fwd_mlp"};
    layout.backward_keys = {"bwd_qkv_ar", "bwd_qkv_rs", "bwd_a_rs", "bwd_a_ag", "bwd_o_ag", "bwd_o_ar", "bwd_mlp"};
  }
  layout.per_instruction = workload.parallel.recompute == workload::Recompute::kFull;
  if (layout.per_instruction) layout.recompute_keys = layout.forward_keys;
  std::vector<std::string> expected = layout.forward_keys;
  expected.insert(expected.end(), layout.backward_keys.begin(), layout.backward_keys.end());
  std::vector<std::string> found = partition::searchable_keys(workload);
  std::vector<std::string> expected_sorted = expected;
  std::sort(expected_sorted.begin(), expected_sorted.end());
  std::sort(found.begin(), found.end());
  if (found != expected_sorted) {
    throw InputError(fmt::format(
        "the artifact's schedule files have no layout for this workload's partition keys ({}); they name {}",
        join(partition::searchable_keys(workload)), join(expected)));
  }
  return layout;
}

std::string freqs_file_name(int number) { return fmt::format("freqs_pipeline_{:05d}.py", number); }
std::string scheds_file_name(int number) { return fmt::format("scheds_pipeline_{:05d}.py", number); }

namespace {

// ---- export steps ----

/// The freqs file: one list per stage of (type, MHz) in plan order, then `comments`.
std::string freqs_file_text(const plan::Plan& plan, const std::string& comments) {
  std::string text = "[\n";
  for (const plan::StagePlan& stage : plan.stages) {
    std::vector<std::string> entries;
    for (const plan::PlannedInstruction& instruction : stage.instructions) {
      entries.push_back(fmt::format("({}, {})", py_quoted(kareus::to_string(instruction.type)), instruction.freq_mhz));
    }
    text += "[" + join(entries) + "],\n";
  }
  return text + "]\n" + comments;
}

/// The scheds file: per stage, one entry per instruction (full recompute) or one (forward,
/// backward) pair per microbatch in microbatch order, then `comments`.
std::string scheds_file_text(const plan::Plan& plan, const ArtifactKeyLayout& layout, int microbatches,
                             const std::string& comments) {
  std::string text = "[\n";
  for (const plan::StagePlan& stage : plan.stages) {
    std::vector<std::string> entries;
    if (layout.per_instruction) {
      for (const plan::PlannedInstruction& instruction : stage.instructions) {
        entries.push_back(entry_text(instruction.type, keys_of(layout, instruction.type), instruction));
      }
    } else {
      std::vector<const plan::PlannedInstruction*> forward(microbatches);
      std::vector<const plan::PlannedInstruction*> backward(microbatches);
      for (const plan::PlannedInstruction& instruction : stage.instructions) {
        (instruction.type == Direction::kForward ? forward : backward)[instruction.microbatch] = &instruction;
      }
      for (int microbatch = 0; microbatch < microbatches; ++microbatch) {
        entries.push_back(fmt::format("({}, {})",
                                      entry_text(Direction::kForward, layout.forward_keys, *forward[microbatch]),
                                      entry_text(Direction::kBackward, layout.backward_keys, *backward[microbatch])));
      }
    }
    text += "[" + join(entries) + "],\n";
  }
  return text + "]\n" + comments;
}

// ---- import steps ----

/// The freqs file's stages: (type, MHz) entries in 1F1B order, nanobatched when a scheds file
/// follows (the artifact without one runs plain Megatron).
std::vector<plan::StagePlan> read_freqs(std::string_view freqs_py, const Origin& freqs,
                                        const workload::Workload& workload, bool nanobatched) {
  const int stages = workload.parallel.pp;
  const int microbatches = workload.parallel.microbatches;
  const PyValue root = detail::parse_python_literal(freqs_py, freqs.file);
  expect(freqs, root, PyValue::Kind::kList, "the file");
  if (static_cast<int>(root.items.size()) != stages) {
    freqs.fail(root, fmt::format("expected {} stage lists (--pp {}), found {}", stages, stages, root.items.size()));
  }
  std::vector<plan::StagePlan> result;
  for (int stage = 0; stage < stages; ++stage) {
    const PyValue& list = root.items[stage];
    expect(freqs, list, PyValue::Kind::kList, fmt::format("stage {}", stage));
    const std::vector<pipeline::Instruction> order = pipeline::one_f_one_b(stage, stages, microbatches);
    if (list.items.size() != order.size()) {
      freqs.fail(list, fmt::format("stage {}: expected {} entries (2 x {} microbatches, --microbatches), found {}",
                                   stage, order.size(), microbatches, list.items.size()));
    }
    plan::StagePlan stage_plan{stage, {}};
    for (std::size_t index = 0; index < order.size(); ++index) {
      const PyValue& entry = list.items[index];
      const std::string where = fmt::format("stage {} entry {}", stage, index);
      expect(freqs, entry, PyValue::Kind::kTuple, where);
      if (entry.items.size() != 2) {
        freqs.fail(entry, fmt::format("{}: expected ('forward'|'backward', MHz), found {} elements", where,
                                      entry.items.size()));
      }
      const Direction type = instruction_type(freqs, entry.items[0], where);
      if (type != order[index].type) {
        freqs.fail(entry, fmt::format("{}: expected '{}' (1F1B order), found '{}'", where,
                                      kareus::to_string(order[index].type), kareus::to_string(type)));
      }
      const PyValue& clock = expect(freqs, entry.items[1], PyValue::Kind::kInt, where + " clock");
      if (clock.int_value < 1 || clock.int_value > kMaxFreqMhz) {
        freqs.fail(clock, fmt::format("{}: clock must be in 1..{} MHz, found {}", where, kMaxFreqMhz, clock.int_value));
      }
      stage_plan.instructions.push_back({type,
                                         order[index].microbatch,
                                         static_cast<int>(clock.int_value),
                                         nanobatched ? workload::OverlapMode::kNanobatch : workload::OverlapMode::kNone,
                                         {}});
    }
    result.push_back(std::move(stage_plan));
  }
  return result;
}

/// Reads a scheds file's comm configs into the instructions read from its freqs file.
class SchedsReader {
 public:
  SchedsReader(const Origin& scheds, std::string_view freqs_origin, const workload::Workload& workload)
      : scheds_(scheds), freqs_origin_(freqs_origin), layout_(artifact_key_layout(workload)), workload_(workload) {}

  void read(std::string_view scheds_py, std::vector<plan::StagePlan>& stages, int microbatches) {
    const PyValue root = detail::parse_python_literal(scheds_py, scheds_.file);
    expect(scheds_, root, PyValue::Kind::kList, "the file");
    if (root.items.size() != stages.size()) {
      scheds_.fail(root, fmt::format("expected {} stage lists (--pp {}), found {}", stages.size(), stages.size(),
                                     root.items.size()));
    }
    for (std::size_t stage = 0; stage < stages.size(); ++stage) {
      const PyValue& list = root.items[stage];
      expect(scheds_, list, PyValue::Kind::kList, fmt::format("stage {}", stage));
      if (layout_.per_instruction) {
        read_per_instruction(list, stage, stages[stage].instructions);
      } else {
        read_per_microbatch(list, stage, stages[stage].instructions, microbatches);
      }
    }
  }

 private:
  const partition::InstructionCommRules& rules(int stage, Direction type) {
    auto found = rules_.find({stage, type});
    if (found == rules_.end()) found = rules_.try_emplace({stage, type}, workload_, stage, type).first;
    return found->second;
  }

  void read_per_instruction(const PyValue& list, std::size_t stage,
                            std::vector<plan::PlannedInstruction>& instructions) {
    if (list.items.size() != instructions.size()) {
      scheds_.fail(list, fmt::format("stage {}: expected {} entries (as in {}), found {}", stage, instructions.size(),
                                     freqs_origin_, list.items.size()));
    }
    for (std::size_t index = 0; index < instructions.size(); ++index) {
      read_entry(list.items[index], stage, instructions[index], fmt::format("stage {} entry {}", stage, index));
    }
  }

  void read_per_microbatch(const PyValue& list, std::size_t stage, std::vector<plan::PlannedInstruction>& instructions,
                           int microbatches) {
    if (static_cast<int>(list.items.size()) != microbatches) {
      scheds_.fail(list, fmt::format("stage {}: expected {} (forward, backward) pairs, one per microbatch, found {}",
                                     stage, microbatches, list.items.size()));
    }
    for (int microbatch = 0; microbatch < microbatches; ++microbatch) {
      const PyValue& pair = list.items[microbatch];
      const std::string where = fmt::format("stage {} microbatch {}", stage, microbatch);
      expect(scheds_, pair, PyValue::Kind::kTuple, where);
      if (pair.items.size() != 2) scheds_.fail(pair, where + ": expected a (forward, backward) pair");
      for (plan::PlannedInstruction& instruction : instructions) {
        if (instruction.microbatch != microbatch) continue;
        read_entry(pair.items[instruction.type == Direction::kForward ? 0 : 1], stage, instruction, where);
      }
    }
  }

  // One ('forward'|'backward', config, ...) tuple: all "not overlapped" configs, or one per key.
  void read_entry(const PyValue& entry, std::size_t stage, plan::PlannedInstruction& instruction,
                  const std::string& where) {
    const std::vector<std::string> keys = keys_of(layout_, instruction.type);
    expect(scheds_, entry, PyValue::Kind::kTuple, where);
    if (entry.items.empty()) scheds_.fail(entry, where + ": empty tuple");
    const Direction type = instruction_type(scheds_, entry.items[0], where);
    if (type != instruction.type) {
      scheds_.fail(entry, fmt::format("{}: expected '{}' (as in {}), found '{}'", where,
                                      kareus::to_string(instruction.type), freqs_origin_, kareus::to_string(type)));
    }
    if (entry.items.size() != keys.size() + 1) {
      scheds_.fail(entry, fmt::format("{}: a {} entry holds {} comm configs ({}), found {}", where,
                                      kareus::to_string(type), keys.size(), join(keys), entry.items.size() - 1));
    }
    const auto not_overlapped = [](const PyValue& config) {
      return config.kind == PyValue::Kind::kString && config.string_value == kNotOverlappedConfig;
    };
    if (std::all_of(entry.items.begin() + 1, entry.items.end(), not_overlapped)) {
      instruction.overlap = workload::OverlapMode::kNone;
      return;
    }
    for (std::size_t slot = 0; slot < keys.size(); ++slot) {
      instruction.partitions[keys[slot]] = parse_config(scheds_, entry.items[slot + 1], keys[slot],
                                                        rules(static_cast<int>(stage), instruction.type), where);
    }
  }

  const Origin& scheds_;
  std::string_view freqs_origin_;
  ArtifactKeyLayout layout_;
  const workload::Workload& workload_;
  std::map<std::pair<int, Direction>, partition::InstructionCommRules> rules_;  // per stage and type
};

}  // namespace

ArtifactFiles export_artifact(const plan::Plan& plan, const workload::Workload& workload, int number,
                              std::string_view origin) {
  // The artifact's schedule files name an instruction by stage and microbatch only: no model chunk.
  if (workload.parallel.vpp != 1) {
    throw InputError(
        fmt::format("{}: made for --vpp {}; the artifact's schedule files have no model chunk, so "
                    "export takes only plans with --vpp 1",
                    origin, workload.parallel.vpp));
  }
  const ArtifactKeyLayout layout = artifact_key_layout(workload);
  plan::check_plan_workload(plan, plan::plan_workload_json(workload, ""), origin);
  const std::string comments =
      fmt::format("# Iteration {} predicted time_s: {}\n# Iteration {} predicted energy_j: {}\n", number,
                  plan.predicted_time_s, number, plan.predicted_energy_j);
  ArtifactFiles files;
  files.freqs_py = freqs_file_text(plan, comments);
  const bool any_overlap = std::any_of(plan.stages.begin(), plan.stages.end(), [](const plan::StagePlan& stage) {
    return std::any_of(stage.instructions.begin(), stage.instructions.end(), [](const auto& instruction) {
      return plan::effective_overlap(instruction) == workload::OverlapMode::kNanobatch;
    });
  });
  if (!any_overlap) return files;
  plan::check_plan_comm_configs(plan, workload, {}, origin);
  files.scheds_py = scheds_file_text(plan, layout, workload.parallel.microbatches, comments);
  return files;
}

plan::Plan import_artifact(std::string_view freqs_py, std::string_view freqs_origin,
                           const std::optional<std::string>& scheds_py, std::string_view scheds_origin,
                           const workload::Workload& workload, std::string_view gpu_name) {
  plan::Plan plan;
  plan.stages = read_freqs(freqs_py, Origin{freqs_origin}, workload, scheds_py.has_value());
  // As parse_plan stores it, so an imported plan equals the plan file it was exported from.
  plan.workload_json = nlohmann::json::parse(plan::plan_workload_json(workload, gpu_name)).dump();
  plan.predicted_time_s = predicted_figure(freqs_py, "time_s", freqs_origin);
  plan.predicted_energy_j = predicted_figure(freqs_py, "energy_j", freqs_origin);
  if (!scheds_py) return plan;
  const Origin scheds{scheds_origin};
  SchedsReader(scheds, freqs_origin, workload).read(*scheds_py, plan.stages, workload.parallel.microbatches);
  return plan;
}

std::vector<ExportedPlan> plans_in_directory(const std::filesystem::path& dir) {
  std::vector<ExportedPlan> plans;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const int number = number_of(entry.path(), "plan_", ".json");
    if (number >= 0) plans.push_back({entry.path(), number});
  }
  if (error) throw InputError(fmt::format("{}: cannot list the folder: {}", dir.string(), error.message()));
  if (plans.empty()) throw InputError(fmt::format("{}: no plan_N.json files in the folder", dir.string()));
  std::sort(plans.begin(), plans.end(),
            [](const ExportedPlan& a, const ExportedPlan& b) { return a.number < b.number; });
  for (std::size_t index = 1; index < plans.size(); ++index) {
    if (plans[index].number == plans[index - 1].number) {
      throw InputError(
          fmt::format("{} and {} have the same number", plans[index - 1].plan.string(), plans[index].plan.string()));
    }
  }
  return plans;
}

std::vector<std::filesystem::path> export_artifact_files(const std::vector<ExportedPlan>& plans,
                                                         const workload::Workload& workload,
                                                         const std::filesystem::path& out_dir) {
  ensure_writable_directory(out_dir, "--out");
  std::vector<std::filesystem::path> written;
  for (const ExportedPlan& entry : plans) {
    if (entry.number < 0 || entry.number > 99'999) {
      throw InputError(fmt::format("{}: plan number {} does not fit the 5 digits of the file names",
                                   entry.plan.string(), entry.number));
    }
    const plan::Plan plan = plan::read_plan(entry.plan);
    const ArtifactFiles files = export_artifact(plan, workload, entry.number, entry.plan.string());
    written.push_back(out_dir / freqs_file_name(entry.number));
    write_file_atomic(written.back(), files.freqs_py);
    if (!files.scheds_py.empty()) {
      written.push_back(out_dir / scheds_file_name(entry.number));
      write_file_atomic(written.back(), files.scheds_py);
    }
  }
  return written;
}

std::vector<std::filesystem::path> import_artifact_files(const std::filesystem::path& in_dir,
                                                         const workload::Workload& workload, std::string_view gpu_name,
                                                         const std::filesystem::path& out_dir) {
  // Each schedule number names one file of each kind, however its digits are padded: two files
  // for one number (freqs_pipeline_1.py beside freqs_pipeline_00001.py) are refused, not one
  // picked. Files are read under the names they were found by.
  std::map<int, std::filesystem::path> freqs_files;
  std::map<int, std::filesystem::path> scheds_files;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(in_dir, error)) {
    for (auto [files, prefix] : {std::pair{&freqs_files, "freqs_pipeline_"}, {&scheds_files, "scheds_pipeline_"}}) {
      const int number = number_of(entry.path(), prefix, ".py");
      if (number < 0) continue;
      if (const auto [found, inserted] = files->emplace(number, entry.path()); !inserted) {
        const auto [first, second] = std::minmax(found->second, entry.path());
        throw InputError(
            fmt::format("{} and {} are both schedule {}: remove one", first.string(), second.string(), number));
      }
    }
  }
  if (error) throw InputError(fmt::format("{}: cannot list the folder: {}", in_dir.string(), error.message()));
  for (const auto& [number, scheds_path] : scheds_files) {
    if (!freqs_files.contains(number)) {
      throw InputError(fmt::format("{}: no {} beside it (the clocks of that schedule)", scheds_path.string(),
                                   freqs_file_name(number)));
    }
  }
  if (freqs_files.empty())
    throw InputError(fmt::format("{}: no freqs_pipeline_NNNNN.py files in the folder", in_dir.string()));
  ensure_writable_directory(out_dir, "--out");
  std::filesystem::remove(out_dir / "frontier.json", error);

  std::vector<plan::FrontierPoint> imported;  // plan paths relative to out_dir
  std::vector<std::filesystem::path> written;
  bool all_predicted = true;
  for (const auto& [number, freqs_path] : freqs_files) {
    const auto scheds_found = scheds_files.find(number);
    // Named in messages as the file looked for when there is none.
    const std::filesystem::path scheds_path =
        scheds_found != scheds_files.end() ? scheds_found->second : in_dir / scheds_file_name(number);
    std::optional<std::string> scheds;
    if (scheds_found != scheds_files.end()) scheds = read_text_file(scheds_path);
    const plan::Plan plan = import_artifact(read_text_file(freqs_path), freqs_path.string(), scheds,
                                            scheds_path.string(), workload, gpu_name);
    const std::string name = fmt::format("plan_{:05d}.json", number);
    written.push_back(out_dir / name);
    plan::write_plan(written.back(), plan);
    all_predicted = all_predicted && plan.predicted_time_s > 0 && plan.predicted_energy_j > 0;
    imported.push_back({plan.predicted_time_s, plan.predicted_energy_j, name});
  }
  if (all_predicted) {
    const std::vector<plan::FrontierPoint> frontier = pareto_filter(
        std::move(imported), [](const plan::FrontierPoint& point) { return point.time_s; },
        [](const plan::FrontierPoint& point) { return point.energy_j; });
    write_file_atomic(out_dir / "frontier.json", plan::frontier_to_json(frontier));
  }
  return written;
}

}  // namespace kareus::interop
