// The measuring side of every search strategy: batches from the log or spread over the devices,
// and the record of what a strategy measured (search_internal.h).
#include <algorithm>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "search_internal.h"

namespace kareus::search {

BatchEvaluator::BatchEvaluator(std::span<device::Device* const> devices, const partition::Partition& partition,
                               const SearchOptions& options)
    : devices_(devices), partition_(partition) {
  if (devices_.empty()) throw InputError("the search needs at least one device");
  const device::Device& first = *devices_.front();
  for (const device::Device* device : devices_) {
    if (device->gpu().name != first.gpu().name || device->kind() != first.kind()) {
      throw InputError(fmt::format("every device of a search must be the same: {} {} and {} {}", first.kind(),
                                   first.gpu().name, device->kind(), device->gpu().name));
    }
  }
  static_power_w_ = first.gpu().static_power_w;
  if (options.log_path) {
    const LogHeader header{options.workload_json,     partition.key,    partition.nanobatch,
                           std::string(first.kind()), first.gpu().name, options.seed};
    log_.emplace(*options.log_path, header, options.warn);
  }
}

std::vector<Evaluation> BatchEvaluator::measure(const std::vector<partition::KnobConfig>& configs) {
  std::vector<Evaluation> results(configs.size());
  std::vector<std::size_t> pending;
  for (std::size_t position = 0; position < configs.size(); ++position) {
    if (log_) {
      if (std::optional<Evaluation> recorded = log_->find(configs[position])) {
        results[position] = std::move(*recorded);
        ++from_log_;
        continue;
      }
    }
    pending.push_back(position);
  }
  std::mutex log_mutex;
  const auto run = [&](std::size_t worker, std::size_t workers) {
    for (std::size_t item = worker; item < pending.size(); item += workers) {
      const std::size_t position = pending[item];
      const device::Measurement measurement = devices_[worker]->measure(partition_, configs[position]);
      results[position] = {configs[position], measurement.time_s, measurement.energy_j};
      if (log_) {
        const std::lock_guard<std::mutex> lock(log_mutex);
        log_->append(results[position]);
      }
    }
  };
  const std::size_t workers = std::min(devices_.size(), pending.size());
  if (workers <= 1) {
    run(0, 1);
    return results;
  }
  std::vector<std::exception_ptr> errors(workers);
  std::vector<std::thread> threads;
  for (std::size_t worker = 0; worker < workers; ++worker) {
    threads.emplace_back([&, worker] {
      try {
        run(worker, workers);
      } catch (...) {
        errors[worker] = std::current_exception();
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return results;
}

void finish_result(SearchResult& result, const BatchEvaluator& evaluator) {
  result.from_log = evaluator.from_log();
  result.energy_front = pareto_front(result.evaluations, result.static_power_w, Objective::kEnergy);
  result.effective_energy_front = pareto_front(result.evaluations, result.static_power_w, Objective::kEffectiveEnergy);
}

MeasuredConfigs::MeasuredConfigs(BatchEvaluator& evaluator, const partition::SearchSpace& space,
                                 const SearchOptions& options)
    : evaluator_(evaluator), space_(space), options_(options), evaluated_(space.size(), false) {
  result_.static_power_w = evaluator.static_power_w();
}

void MeasuredConfigs::measure(const std::vector<std::size_t>& indices) {
  std::vector<partition::KnobConfig> configs;
  for (std::size_t index : indices) configs.push_back(space_.at(index));
  std::vector<Evaluation> measured = evaluator_.measure(configs);
  for (std::size_t position = 0; position < indices.size(); ++position) {
    evaluated_[indices[position]] = true;
    order_.push_back(indices[position]);
    result_.evaluations.push_back(std::move(measured[position]));
  }
  ++result_.batches;
  if (options_.progress) options_.progress(order_.size(), options_.budget);
}

SearchResult MeasuredConfigs::finish(StopReason reason) {
  result_.stop_reason = order_.size() == space_.size() ? StopReason::kSpaceExhausted : reason;
  finish_result(result_, evaluator_);
  return std::move(result_);
}

double floored_effective_energy(const Evaluation& evaluation, double static_power_w) {
  // Floor at 0.1% of E: a noisy near-idle measurement must not give log of a non-positive number.
  return std::max(evaluation.energy_j - static_power_w * evaluation.time_s, 1e-3 * evaluation.energy_j);
}

Observations observe(const FeatureRows& features, const MeasuredConfigs& measured) {
  Observations observed;
  const std::vector<Evaluation>& evaluations = measured.evaluations();
  for (std::size_t position = 0; position < evaluations.size(); ++position) {
    observed.rows.push_back(features[measured.order()[position]]);
    observed.log_times.push_back(std::log(evaluations[position].time_s));
    observed.log_energies.push_back(
        std::log(floored_effective_energy(evaluations[position], measured.static_power_w())));
  }
  return observed;
}

}  // namespace kareus::search
