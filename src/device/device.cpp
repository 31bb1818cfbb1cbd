#include "kareus/device/device.h"

namespace kareus::device {

partition::Partition collective_partition(const workload::Op& collective) {
  partition::Partition partition;
  partition.key = "collective:" + collective.name;
  partition.direction = collective.direction;
  partition.collective = collective;
  partition.slots.push_back({"start", 0});
  return partition;
}

Measurement Device::measure_serial(const SerialWork& work, int freq_mhz) {
  Measurement total;
  auto add = [&total](const Measurement& part) {
    total.time_s += part.time_s;
    total.energy_j += part.energy_j;
  };
  partition::Partition compute;
  compute.key = work.key;
  auto flush = [&] {
    if (compute.compute_ops.empty()) return;
    add(measure(compute, {freq_mhz, 0, ""}));
    compute.compute_ops.clear();
  };
  for (const workload::Op& op : work.ops) {
    if (!op.is_collective()) {
      compute.compute_ops.push_back(op);
      continue;
    }
    flush();
    add(measure(collective_partition(op), {freq_mhz, work.ctas, "start"}));
  }
  flush();
  return total;
}

}  // namespace kareus::device
