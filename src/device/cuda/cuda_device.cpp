#include "kareus/device/cuda_device.h"

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "kareus/common/error.h"
#include "kareus/device/energy_window.h"
#include "kareus/device/stream_schedule.h"
#include "kareus/nvml/nvml.h"
#include "kernels.h"

namespace kareus::device {
namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kGemmWorkspaceBytes = std::size_t{32} << 20;

void check_cuda(cudaError_t status, const std::string& what) {
  if (status != cudaSuccess) {
    throw Error(fmt::format("{} failed: {} ({})", what, cudaGetErrorString(status), cudaGetErrorName(status)));
  }
}

void check_cublas(cublasStatus_t status, const std::string& what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(fmt::format("{} failed: cuBLAS status {}", what, static_cast<int>(status)));
}

void check_nccl(ncclResult_t status, const std::string& what) {
  if (status != ncclSuccess) throw Error(fmt::format("{} failed: {}", what, ncclGetErrorString(status)));
}

std::size_t round_down(double bytes, std::size_t multiple) {
  return std::max(multiple, static_cast<std::size_t>(bytes) / multiple * multiple);
}

/// A device allocation that grows on demand; new memory is filled with random bf16.
class Buffer {
 public:
  Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (data_ != nullptr) cudaFree(data_);
  }
  void* ensure(std::size_t bytes, std::uint64_t seed, cudaStream_t stream) {
    bytes = std::max<std::size_t>(bytes, 256);
    if (bytes <= bytes_) return data_;
    if (data_ != nullptr) check_cuda(cudaFree(data_), "cudaFree");
    data_ = nullptr;
    bytes_ = 0;
    check_cuda(cudaMalloc(&data_, bytes), fmt::format("cudaMalloc({} MiB)", bytes >> 20));
    bytes_ = bytes;
    cuda::fill_random(data_, bytes / 2, seed, stream);
    return data_;
  }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

/// One cuBLASLt matmul in its column-major terms: D (m x n) = op(A) (m x k) B (k x n), where
/// op(A) = A^T (A stored k x m) when transpose_a, each of `batch` matrices `stride_*` apart.
struct MatmulShape {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false;
  int batch = 1;
  std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;

  friend auto operator<=>(const MatmulShape&, const MatmulShape&) = default;
};

struct MatmulPlan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
};

/// Everything one GPU needs to run partitions: streams, events, cuBLASLt, buffers.
struct GpuContext {
  int device = 0;
  cudaStream_t compute = nullptr;
  cudaStream_t comm = nullptr;
  cudaEvent_t launch = nullptr;
  cudaEvent_t comm_done = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  Buffer buffers[5];
  Buffer comm_src, comm_dst, weight;
  std::map<MatmulShape, MatmulPlan> matmul_plans;

  explicit GpuContext(int index) : device(index) {
    check_cuda(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
    check_cuda(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaStreamCreateWithFlags(&comm, cudaStreamNonBlocking), "cudaStreamCreate");
    check_cuda(cudaEventCreateWithFlags(&launch, cudaEventDisableTiming), "cudaEventCreate");
    check_cuda(cudaEventCreateWithFlags(&comm_done, cudaEventDisableTiming), "cudaEventCreate");
    check_cublas(cublasLtCreate(&lt), "cublasLtCreate");
    check_cuda(cudaMalloc(&workspace, kGemmWorkspaceBytes), "cudaMalloc(cuBLASLt workspace)");
  }
  GpuContext(const GpuContext&) = delete;
  GpuContext& operator=(const GpuContext&) = delete;
  ~GpuContext() {
    cudaSetDevice(device);
    cudaDeviceSynchronize();
    for (auto& [shape, plan] : matmul_plans) {
      cublasLtMatrixLayoutDestroy(plan.a);
      cublasLtMatrixLayoutDestroy(plan.b);
      cublasLtMatrixLayoutDestroy(plan.c);
      cublasLtMatmulDescDestroy(plan.desc);
    }
    cublasLtDestroy(lt);
    cudaFree(workspace);
    cudaEventDestroy(launch);
    cudaEventDestroy(comm_done);
    cudaStreamDestroy(compute);
    cudaStreamDestroy(comm);
  }

  /// bf16 inputs and output, fp32 accumulation; the plan (heuristic's best algorithm) is cached.
  void matmul(const MatmulShape& shape, const void* a, const void* b, void* c) {
    auto [found, inserted] = matmul_plans.try_emplace(shape);
    MatmulPlan& plan = found->second;
    if (inserted) {
      try {
        check_cublas(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate");
        const cublasOperation_t transpose = shape.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
        check_cublas(
            cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, sizeof(transpose)),
            "cublasLtMatmulDescSetAttribute(TRANSA)");
        const auto layout = [&](cublasLtMatrixLayout_t& target, std::int64_t rows, std::int64_t cols,
                                std::int64_t stride) {
          check_cublas(cublasLtMatrixLayoutCreate(&target, CUDA_R_16BF, static_cast<std::uint64_t>(rows),
                                                  static_cast<std::uint64_t>(cols), rows),
                       "cublasLtMatrixLayoutCreate");
          if (shape.batch > 1) {
            const std::int32_t count = shape.batch;
            cublasLtMatrixLayoutSetAttribute(target, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count));
            cublasLtMatrixLayoutSetAttribute(target, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                             sizeof(stride));
          }
        };
        layout(plan.a, shape.transpose_a ? shape.k : shape.m, shape.transpose_a ? shape.m : shape.k, shape.stride_a);
        layout(plan.b, shape.k, shape.n, shape.stride_b);
        layout(plan.c, shape.m, shape.n, shape.stride_c);
        cublasLtMatmulPreference_t preference = nullptr;
        check_cublas(cublasLtMatmulPreferenceCreate(&preference), "cublasLtMatmulPreferenceCreate");
        const std::size_t workspace_bytes = kGemmWorkspaceBytes;
        cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                             sizeof(workspace_bytes));
        cublasLtMatmulHeuristicResult_t result{};
        int returned = 0;
        const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(lt, plan.desc, plan.a, plan.b, plan.c, plan.c,
                                                                     preference, 1, &result, &returned);
        cublasLtMatmulPreferenceDestroy(preference);
        if (status != CUBLAS_STATUS_SUCCESS || returned == 0) {
          throw Error(fmt::format("cuBLASLt has no bf16 algorithm for m={} n={} k={} batch {}", shape.m, shape.n,
                                  shape.k, shape.batch));
        }
        plan.algo = result.algo;
      } catch (...) {
        if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
        if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
        if (plan.c != nullptr) cublasLtMatrixLayoutDestroy(plan.c);
        if (plan.desc != nullptr) cublasLtMatmulDescDestroy(plan.desc);
        matmul_plans.erase(found);
        throw;
      }
    }
    const float alpha = 1, beta = 0;
    check_cublas(cublasLtMatmul(lt, plan.desc, &alpha, a, plan.a, b, plan.b, &beta, c, plan.c, c, plan.c, &plan.algo,
                                workspace, kGemmWorkspaceBytes, compute),
                 fmt::format("cublasLtMatmul(m={} n={} k={} batch {})", shape.m, shape.n, shape.k, shape.batch));
  }

  /// Row-major C[m x n] = A[m x k] B[k x n]: in cuBLASLt's column-major terms C^T = B^T A^T on
  /// the same memory.
  void gemm(long long m, long long n, long long k) {
    void* a = buffers[0].ensure(static_cast<std::size_t>(m * k * 2), 1, compute);
    void* b = buffers[1].ensure(static_cast<std::size_t>(k * n * 2), 2, compute);
    void* c = buffers[2].ensure(static_cast<std::size_t>(m * n * 2), 3, compute);
    matmul({n, m, k, false, 1, 0, 0, 0}, b, a, c);
  }

  /// Causal attention, unfused: S = Q K^T per (sequence, head) as one strided-batched GEMM, a
  /// causal softmax in place, O = P V. Q, O: [batch x heads, seq_q, 128]; K, V: [batch x heads,
  /// seq_k, 128] (grouped K/V heads are stored per query head). It materializes the score
  /// matrix, so it moves more HBM bytes than a fused FlashAttention kernel would.
  void attention(int batch_heads, int seq_q, int seq_k, int head_dim) {
    const std::int64_t q_elements = std::int64_t{seq_q} * head_dim;
    const std::int64_t kv_elements = std::int64_t{seq_k} * head_dim;
    const std::int64_t score_elements = std::int64_t{seq_q} * seq_k;
    void* q = buffers[0].ensure(static_cast<std::size_t>(batch_heads * q_elements * 2), 4, compute);
    void* k = buffers[1].ensure(static_cast<std::size_t>(batch_heads * kv_elements * 2), 5, compute);
    void* v = buffers[3].ensure(static_cast<std::size_t>(batch_heads * kv_elements * 2), 6, compute);
    void* o = buffers[2].ensure(static_cast<std::size_t>(batch_heads * q_elements * 2), 7, compute);
    void* scores = buffers[4].ensure(static_cast<std::size_t>(batch_heads * score_elements * 2), 19, compute);
    // S^T (seq_k x seq_q, column-major) = K (seq_k x d) Q^T: A = K stored d x seq_k, transposed.
    matmul({seq_k, seq_q, head_dim, true, batch_heads, kv_elements, q_elements, score_elements}, k, q, scores);
    cuda::causal_softmax(scores, static_cast<std::size_t>(batch_heads) * seq_q, seq_q, seq_k,
                         1.0f / std::sqrt(static_cast<float>(head_dim)), compute);
    // O^T (d x seq_q) = V^T (d x seq_k) P^T (seq_k x seq_q).
    matmul({head_dim, seq_q, seq_k, false, batch_heads, kv_elements, score_elements, q_elements}, v, scores, o);
  }
};

struct AttentionShape {
  int batch = 1, seq_q = 1, seq_k = 1, heads = 1, head_dim = 128;
};

std::size_t elements_of(double bytes) { return std::max<std::size_t>(2, static_cast<std::size_t>(bytes / 2) / 2 * 2); }

}  // namespace

bool cuda_backend_compiled() { return true; }

struct CudaDevice::Impl {
  GpuSpec gpu;
  workload::Workload workload;
  CudaDeviceOptions options;
  std::unique_ptr<nvml::NvmlLibrary> nvml;
  std::string name;
  int visible_gpus = 0;
  std::vector<int> supported_mhz;
  std::vector<std::unique_ptr<GpuContext>> contexts;             // [0] is the measured GPU; peers for NCCL
  std::map<std::pair<int, int>, std::vector<ncclComm_t>> comms;  // (ranks, ctas) -> one per rank
  std::unique_ptr<nvml::ClockLockGuard> guard;
  MeasurementDetails last;
  AttentionShape attention;
  double tokens = 1;
  cudaEvent_t start = nullptr, stop = nullptr, progress[2] = {nullptr, nullptr};

  ~Impl() {
    for (auto& [key, ranks] : comms) {
      for (ncclComm_t comm : ranks) ncclCommDestroy(comm);
    }
    if (start != nullptr) {
      cudaSetDevice(options.gpu_index);
      cudaEventDestroy(start);
      cudaEventDestroy(stop);
      cudaEventDestroy(progress[0]);
      cudaEventDestroy(progress[1]);
    }
    contexts.clear();
    guard.reset();  // resets the clocks
  }

  [[nodiscard]] int nccl_ranks(const workload::Op& collective) const {
    const int ranks = collective.collective->group_size;
    if (options.collective == CollectiveBackend::kProxy || ranks < 2) return 0;
    return options.gpu_index + ranks <= visible_gpus ? ranks : 0;
  }

  GpuContext& context(int rank) {
    while (static_cast<int>(contexts.size()) <= rank) {
      contexts.push_back(std::make_unique<GpuContext>(options.gpu_index + static_cast<int>(contexts.size())));
    }
    return *contexts[static_cast<std::size_t>(rank)];
  }

  std::vector<ncclComm_t>& communicators(int ranks, int ctas) {
    auto [found, inserted] = comms.try_emplace({ranks, ctas});
    if (!inserted) return found->second;
    std::vector<ncclComm_t>& result = found->second;
    result.assign(static_cast<std::size_t>(ranks), nullptr);
    try {
      for (int rank = 0; rank < ranks; ++rank) (void)context(rank);
      ncclUniqueId id;
      check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (int rank = 0; rank < ranks; ++rank) {
        check_cuda(cudaSetDevice(options.gpu_index + rank), "cudaSetDevice");
        ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
        config.blocking = 1;
        config.minCTAs = ctas;  // exactly `ctas` CTAs (NCCL caps both at its channel limit)
        config.maxCTAs = ctas;
        check_nccl(ncclCommInitRankConfig(&result[static_cast<std::size_t>(rank)], ranks, id, rank, &config),
                   fmt::format("ncclCommInitRankConfig(rank {} of {}, {} CTAs)", rank, ranks, ctas));
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd (communicator init)");
    } catch (...) {
      for (ncclComm_t comm : result) {
        if (comm != nullptr) ncclCommDestroy(comm);
      }
      comms.erase(found);
      throw;
    }
    return result;
  }

  void run_op(GpuContext& gpu_context, const workload::Op& op) {
    GpuContext& c = gpu_context;
    const cudaStream_t stream = c.compute;
    switch (op.kind) {
      case workload::OpKind::kGemm: {
        const auto m = static_cast<long long>(op.gemm.m), n = static_cast<long long>(op.gemm.n),
                   k = static_cast<long long>(op.gemm.k);
        if (op.direction == Direction::kForward) {
          c.gemm(m, n, k);
        } else {  // input gradient (m x k over n) and weight gradient (k x n over m)
          c.gemm(m, k, n);
          c.gemm(k, n, m);
        }
        return;
      }
      case workload::OpKind::kAttention: {
        const AttentionShape& s = attention;
        // Backward (2x forward FLOPs by the op graph's convention) runs the forward twice.
        const int passes = op.direction == Direction::kForward ? 1 : 2;
        for (int pass = 0; pass < passes; ++pass) c.attention(s.batch * s.heads, s.seq_q, s.seq_k, s.head_dim);
        return;
      }
      case workload::OpKind::kNorm: {
        const int cols = workload.model.hidden;
        const std::size_t rows = std::max<std::size_t>(1, elements_of(op.bytes_written) / cols);
        void* x = c.buffers[0].ensure(rows * cols * 2, 8, stream);
        void* y = c.buffers[2].ensure(rows * cols * 2, 9, stream);
        cuda::rmsnorm(x, c.weight.ensure(std::size_t(cols) * 2, 10, stream), y, rows, cols, stream);
        return;
      }
      case workload::OpKind::kRope: {
        const int head_dim = workload.model.head_dim;
        const std::size_t rows = std::max<std::size_t>(1, elements_of(op.bytes_written) / head_dim);
        void* x = c.buffers[0].ensure(rows * head_dim * 2, 11, stream);
        cuda::rope(x, rows, head_dim, std::max<std::size_t>(1, rows / static_cast<std::size_t>(tokens)), stream);
        return;
      }
      case workload::OpKind::kActivation: {
        const std::size_t rows = static_cast<std::size_t>(tokens);
        const int cols = static_cast<int>(std::max<std::size_t>(1, elements_of(op.bytes_written) / rows));
        void* in = c.buffers[0].ensure(rows * cols * 4, 12, stream);
        void* out = c.buffers[2].ensure(rows * cols * 2, 13, stream);
        cuda::swiglu(in, out, rows, cols, stream);
        return;
      }
      default: {  // elementwise (bias-dropout-add), embedding, loss: a streaming add of the op's bytes
        const std::size_t count = elements_of(std::max(op.bytes_written, op.bytes_read / 2));
        void* a = c.buffers[0].ensure(count * 2, 14, stream);
        void* b = c.buffers[1].ensure(count * 2, 15, stream);
        void* out = c.buffers[2].ensure(count * 2, 16, stream);
        cuda::add(a, b, out, count, stream);
        return;
      }
    }
  }

  void run_collective(const workload::Op& op, int ctas) {
    const workload::Collective& collective = *op.collective;
    const double ranks = collective.group_size;
    const std::size_t payload =
        round_down(collective.bytes, 16 * static_cast<std::size_t>(std::max(1, collective.group_size)));
    if (const int nccl = nccl_ranks(op); nccl > 0) {
      std::vector<ncclComm_t>& ranks_comms = communicators(nccl, ctas);
      const std::size_t count = payload / 2;
      check_nccl(ncclGroupStart(), "ncclGroupStart");
      for (int rank = 0; rank < nccl; ++rank) {
        GpuContext& c = context(rank);
        check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
        void* src = c.comm_src.ensure(payload, 17, c.comm);
        void* dst = c.comm_dst.ensure(payload, 18, c.comm);
        ncclComm_t comm = ranks_comms[static_cast<std::size_t>(rank)];
        switch (collective.kind) {
          case workload::CollectiveKind::kAllReduce:
            check_nccl(ncclAllReduce(src, dst, count, ncclBfloat16, ncclSum, comm, c.comm), "ncclAllReduce");
            break;
          case workload::CollectiveKind::kAllGather:
            check_nccl(ncclAllGather(src, dst, count / nccl, ncclBfloat16, comm, c.comm), "ncclAllGather");
            break;
          case workload::CollectiveKind::kReduceScatter:
            check_nccl(ncclReduceScatter(src, dst, count / nccl, ncclBfloat16, ncclSum, comm, c.comm),
                       "ncclReduceScatter");
            break;
          case workload::CollectiveKind::kSendRecv:
            throw Error("the CUDA backend measures TP/CP collectives, not pipeline sends");
        }
      }
      check_nccl(ncclGroupEnd(), "ncclGroupEnd");
      return;
    }
    // One GPU: the proxy moves the bus bytes of the ring algorithm at most at the link's rate.
    GpuContext& c = context(0);
    const double fraction = (ranks - 1) / std::max(ranks, 1.0);
    std::size_t reduce = 0, copy = 0;
    switch (collective.kind) {
      case workload::CollectiveKind::kAllReduce:
        reduce = copy = round_down(fraction * payload, 16);
        break;
      case workload::CollectiveKind::kAllGather:
        copy = round_down(fraction * payload, 16);
        break;
      case workload::CollectiveKind::kReduceScatter:
        reduce = round_down(fraction * payload, 16);
        break;
      case workload::CollectiveKind::kSendRecv:
        copy = payload;
        break;
    }
    void* src = c.comm_src.ensure(payload, 17, c.comm);
    void* dst = c.comm_dst.ensure(payload, 18, c.comm);
    cuda::collective_proxy(src, dst, payload, reduce, copy, ctas, gpu.link_bandwidth_gbps * 1e9 * gpu.link_efficiency,
                           c.comm);
  }

  /// Enqueues one run of the partition on every participating GPU (StreamSchedule order).
  void enqueue(const partition::Partition& partition, const partition::KnobConfig& config,
               const StreamSchedule& schedule) {
    const int participants = partition.collective ? std::max(1, nccl_ranks(*partition.collective)) : 1;
    for (const StreamStep& step : schedule.steps) {
      for (int rank = 0; rank < participants; ++rank) {
        GpuContext& c = context(rank);
        check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
        switch (step.kind) {
          case StreamStepKind::kComputeOp:
            run_op(c, partition.compute_ops[step.op_index]);
            break;
          case StreamStepKind::kLaunchCollective:
            check_cuda(cudaEventRecord(c.launch, c.compute), "cudaEventRecord(launch)");
            check_cuda(cudaStreamWaitEvent(c.comm, c.launch, 0), "cudaStreamWaitEvent(comm, launch)");
            break;
          case StreamStepKind::kJoin:
            check_cuda(cudaStreamWaitEvent(c.compute, c.comm_done, 0), "cudaStreamWaitEvent(join)");
            break;
        }
      }
      if (step.kind == StreamStepKind::kLaunchCollective) {
        run_collective(*partition.collective, config.ctas);
        for (int rank = 0; rank < participants; ++rank) {
          GpuContext& c = context(rank);
          check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
          check_cuda(cudaEventRecord(c.comm_done, c.comm), "cudaEventRecord(comm_done)");
        }
      }
    }
    check_cuda(cudaSetDevice(options.gpu_index), "cudaSetDevice");
  }

  void synchronize(int participants) {
    for (int rank = 0; rank < participants; ++rank) {
      GpuContext& c = context(rank);
      check_cuda(cudaSetDevice(c.device), "cudaSetDevice");
      check_cuda(cudaStreamSynchronize(c.compute), "cudaStreamSynchronize");
      check_cuda(cudaStreamSynchronize(c.comm), "cudaStreamSynchronize");
    }
    check_cuda(cudaSetDevice(options.gpu_index), "cudaSetDevice");
  }
};

CudaDevice::CudaDevice(GpuSpec gpu, workload::Workload workload, CudaDeviceOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& impl = *impl_;
  impl.gpu = std::move(gpu);
  impl.workload = std::move(workload);
  impl.options = std::move(options);
  const int index = impl.options.gpu_index;
  // NVML numbers GPUs by PCI bus; make CUDA do the same (before its first call) so the clock
  // we lock is the GPU we measure.
  ::setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 0);
  impl.nvml = std::make_unique<nvml::NvmlLibrary>(impl.options.nvml_library);  // "no NVIDIA driver found" without one
  if (const cudaError_t status = cudaGetDeviceCount(&impl.visible_gpus);
      status != cudaSuccess || impl.visible_gpus == 0) {
    throw Error(
        fmt::format("no NVIDIA driver/GPU found: cudaGetDeviceCount: {}; check nvidia-smi, or use the "
                    "emulator (--backend emulator)",
                    status != cudaSuccess ? cudaGetErrorString(status) : "0 devices"));
  }
  if (index < 0 || index >= impl.visible_gpus) {
    throw InputError(fmt::format("--gpu-index {}: CUDA sees {} GPUs", index, impl.visible_gpus));
  }
  impl.nvml->check_device(index);
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, index), "cudaGetDeviceProperties");
  impl.name = impl.nvml->name(index);
  if (properties.major < 8) {
    throw Error(
        fmt::format("gpu {} ({}) has compute capability {}.{}: the CUDA backend needs sm_80 or newer (A100, "
                    "H100, H200); use the emulator for older GPUs",
                    index, properties.name, properties.major, properties.minor));
  }
  if (impl.name != properties.name) {
    throw Error(
        fmt::format("CUDA gpu {} is \"{}\" but NVML gpu {} is \"{}\": unset CUDA_VISIBLE_DEVICES or make it "
                    "list GPUs in PCI bus order",
                    index, properties.name, index, impl.name));
  }
  if (properties.multiProcessorCount != impl.gpu.sm_count) {
    throw InputError(fmt::format("--gpu {} has {} SMs but gpu {} ({}) has {}: pass the preset of this GPU",
                                 impl.gpu.name, impl.gpu.sm_count, index, impl.name, properties.multiProcessorCount));
  }
  const workload::ModelSpec& model = impl.workload.model;
  const workload::Parallelism& parallel = impl.workload.parallel;
  if (impl.workload.token_nanobatches()) {
    // The attention kernel here runs whole causal sequences; half of one has a different mask.
    throw InputError(fmt::format(
        "--backend cuda measures nanobatches of whole sequences; --mbs {} in --nanobatches {} splits tokens, which "
        "only the emulator prices: profile with --mbs >= 2 or --nanobatches 1",
        parallel.mbs, parallel.nanobatches));
  }
  impl.attention = {static_cast<int>(impl.workload.nanobatch_sequences()), parallel.seq / parallel.cp, parallel.seq,
                    model.heads / parallel.tp, model.head_dim};
  impl.tokens = std::max(1.0, impl.workload.nanobatch_tokens_per_gpu());
  impl.supported_mhz = impl.nvml->supported_clocks_mhz(index);
  const int max_group = std::max(parallel.tp, parallel.cp);
  if (impl.options.collective == CollectiveBackend::kNccl && index + max_group > impl.visible_gpus) {
    throw Error(fmt::format("--collective nccl needs {} GPUs from gpu {}, CUDA sees {}: use --collective proxy",
                            max_group, index, impl.visible_gpus));
  }
  std::vector<int> locked_gpus{index};
  if (impl.options.collective != CollectiveBackend::kProxy && index + max_group <= impl.visible_gpus) {
    for (int peer = index + 1; peer < index + max_group; ++peer) locked_gpus.push_back(peer);
  }
  impl.guard = std::make_unique<nvml::ClockLockGuard>(*impl.nvml, locked_gpus, impl.options.handle_signals);
  (void)impl.context(0);
  check_cuda(cudaSetDevice(index), "cudaSetDevice");
  check_cuda(cudaEventCreate(&impl.start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&impl.stop), "cudaEventCreate");
  check_cuda(cudaEventCreateWithFlags(&impl.progress[0], cudaEventDisableTiming), "cudaEventCreate");
  check_cuda(cudaEventCreateWithFlags(&impl.progress[1], cudaEventDisableTiming), "cudaEventCreate");
}

CudaDevice::~CudaDevice() = default;

const GpuSpec& CudaDevice::gpu() const { return impl_->gpu; }

MeasurementDetails CudaDevice::last_details() const { return impl_->last; }

std::string CudaDevice::device_name() const { return impl_->name; }

Measurement CudaDevice::measure(const partition::Partition& partition, const partition::KnobConfig& config) {
  Impl& impl = *impl_;
  const CudaDeviceOptions& options = impl.options;
  const int index = options.gpu_index;
  validate_config(impl.gpu, partition, config);
  if (std::find(impl.supported_mhz.begin(), impl.supported_mhz.end(), config.freq_mhz) == impl.supported_mhz.end()) {
    throw InputError(fmt::format("freq_mhz {}: gpu {} ({}) supports {}..{} MHz but not this clock (NVML's list)",
                                 config.freq_mhz, index, impl.name, impl.supported_mhz.back(),
                                 impl.supported_mhz.front()));
  }
  const StreamSchedule schedule = schedule_partition(partition, config);
  const int participants = partition.collective ? std::max(1, impl.nccl_ranks(*partition.collective)) : 1;
  const cudaStream_t compute = impl.context(0).compute;

  // As in the artifact: cool down at the locked clock (measure_window), warm up, then the
  // window. The warm-up also allocates and fills buffers and builds cuBLASLt plans and
  // communicators, and times each run so the window knows how many runs fill it.
  auto warm_up = [&] {
    double run_s = 0;
    const auto warmup_end = Clock::now() + std::chrono::duration<double>(options.warmup_s);
    int warmup_runs = 0;
    do {
      nvml::ClockLockGuard::throw_if_interrupted();
      check_cuda(cudaEventRecord(impl.start, compute), "cudaEventRecord");
      impl.enqueue(partition, config, schedule);
      check_cuda(cudaEventRecord(impl.stop, compute), "cudaEventRecord");
      impl.synchronize(participants);
      float elapsed_ms = 0;
      check_cuda(cudaEventElapsedTime(&elapsed_ms, impl.start, impl.stop), "cudaEventElapsedTime");
      run_s = elapsed_ms * 1e-3;
      ++warmup_runs;
    } while (Clock::now() < warmup_end || warmup_runs < 2);
    return std::max(run_s, 1e-6);
  };
  auto run_window = [&](EnergyWindow& window) {
    const double run_s = warm_up();
    const int repetitions = std::max(1, static_cast<int>(std::ceil(options.window_s / run_s)));
    const int chunk = std::max(1, static_cast<int>(0.05 / run_s));  // ~50 ms between NVML readings
    window.begin();
    check_cuda(cudaEventRecord(impl.start, compute), "cudaEventRecord");
    for (int run = 0; run < repetitions; ++run) {
      impl.enqueue(partition, config, schedule);
      if ((run + 1) % chunk == 0 || run + 1 == repetitions) {
        // Keep at most two chunks in flight: wait for the previous one, read NVML meanwhile.
        const int slot = (run / chunk) % 2;
        check_cuda(cudaEventRecord(impl.progress[slot], compute), "cudaEventRecord");
        check_cuda(cudaEventSynchronize(impl.progress[1 - slot]), "cudaEventSynchronize");
        window.sample();
      }
    }
    check_cuda(cudaEventRecord(impl.stop, compute), "cudaEventRecord");
    impl.synchronize(participants);
    window.end();
    float elapsed_ms = 0;
    check_cuda(cudaEventElapsedTime(&elapsed_ms, impl.start, impl.stop), "cudaEventElapsedTime");
    return WindowWork{elapsed_ms * 1e-3, repetitions};
  };
  WindowMeasurement result =
      measure_window(*impl.nvml, *impl.guard, options, config.freq_mhz, partition.key, run_window);
  impl.last = result.details;
  return result.per_run;
}

ClockSwitchResult CudaDevice::measure_clock_switch(int from_mhz, int to_mhz) {
  Impl& impl = *impl_;
  const int index = impl.options.gpu_index;
  GpuContext& c = impl.context(0);
  // Keep the GPU busy (an unpaced proxy over all SMs) so the clock is not the idle one.
  const std::size_t bytes = std::size_t{256} << 20;
  void* src = c.comm_src.ensure(bytes, 17, c.comm);
  void* dst = c.comm_dst.ensure(bytes, 18, c.comm);
  const double busy_bytes = impl.gpu.hbm_bandwidth_gbps * 1e9 * 3;  // ~3 s of copying
  cuda::collective_proxy(src, dst, bytes, 0, round_down(busy_bytes, 16), impl.gpu.sm_count, 0, c.comm);
  impl.guard->lock(from_mhz);
  sleep_interruptible(0.5);
  ClockSwitchResult result{from_mhz, to_mhz, 0, 0, 0};
  const auto begin = Clock::now();
  impl.guard->lock(to_mhz);
  result.call_s = std::chrono::duration<double>(Clock::now() - begin).count();
  for (;;) {
    result.observed_mhz = impl.nvml->sm_clock_mhz(index);
    result.settle_s = std::chrono::duration<double>(Clock::now() - begin).count();
    if (std::abs(result.observed_mhz - to_mhz) <= impl.options.clock_tolerance_mhz || result.settle_s > 1.0) break;
    std::this_thread::sleep_for(std::chrono::microseconds(500));
  }
  check_cuda(cudaStreamSynchronize(c.comm), "cudaStreamSynchronize");
  impl.guard->reset();
  return result;
}

}  // namespace kareus::device
