// The CUDA backend's own kernels: simple, correct, and sized from the ops' shapes. Speed is
// the vendor libraries' job (cuBLASLt GEMMs, also attention's two batched GEMMs); these are
// the memory-bound ops, attention's causal softmax and the collective proxy.
#include "kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <string>

#include "kareus/common/error.h"

namespace kareus::device::cuda {
namespace {

void check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw Error(std::string("CUDA kernel ") + kernel + " failed to launch: " + cudaGetErrorString(status));
  }
}

unsigned int blocks_for(std::size_t count, unsigned int threads) {
  const std::size_t blocks = (count + threads - 1) / threads;
  return static_cast<unsigned int>(blocks < 65535u * 16u ? (blocks == 0 ? 1 : blocks) : 65535u * 16u);
}

__global__ void fill_random_kernel(__nv_bfloat16* data, std::size_t count, std::uint64_t seed) {
  for (std::size_t index = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; index < count;
       index += std::size_t{gridDim.x} * blockDim.x) {
    std::uint64_t x = (index + 1) * 0x9e3779b97f4a7c15ULL ^ seed;  // splitmix64
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    x ^= x >> 31;
    data[index] = __float2bfloat16(static_cast<float>(x >> 40) / static_cast<float>(1 << 23) - 1.0f);
  }
}

__global__ void rmsnorm_kernel(const __nv_bfloat16* x, const __nv_bfloat16* weight, __nv_bfloat16* y, int cols) {
  __shared__ float partial[32];
  const __nv_bfloat16* row = x + blockIdx.x * std::size_t(cols);
  float sum = 0;
  for (int col = threadIdx.x; col < cols; col += blockDim.x) {
    const float value = __bfloat162float(row[col]);
    sum += value * value;
  }
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = sum;
  __syncthreads();
  if (threadIdx.x < 32) {
    sum = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_down_sync(0xffffffffu, sum, offset);
    if (threadIdx.x == 0) partial[0] = rsqrtf(sum / cols + 1e-6f);
  }
  __syncthreads();
  const float scale = partial[0];
  for (int col = threadIdx.x; col < cols; col += blockDim.x) {
    y[blockIdx.x * std::size_t(cols) + col] =
        __float2bfloat16(__bfloat162float(row[col]) * scale * __bfloat162float(weight[col]));
  }
}

__global__ void rope_kernel(__nv_bfloat16* x, std::size_t rows, int head_dim, std::size_t rows_per_position) {
  const int half = head_dim / 2;
  const std::size_t pairs = rows * half;
  for (std::size_t index = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; index < pairs;
       index += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = index / half;
    const int pair = static_cast<int>(index % half);
    const float position = static_cast<float>(row / rows_per_position);
    const float angle = position * __powf(10000.0f, -2.0f * pair / head_dim);
    float sine, cosine;
    __sincosf(angle, &sine, &cosine);
    __nv_bfloat16* base = x + row * head_dim;
    const float a = __bfloat162float(base[pair]);
    const float b = __bfloat162float(base[pair + half]);
    base[pair] = __float2bfloat16(a * cosine - b * sine);
    base[pair + half] = __float2bfloat16(a * sine + b * cosine);
  }
}

__global__ void swiglu_kernel(const __nv_bfloat16* in, __nv_bfloat16* out, std::size_t rows, int cols) {
  const std::size_t count = rows * cols;
  for (std::size_t index = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; index < count;
       index += std::size_t{gridDim.x} * blockDim.x) {
    const std::size_t row = index / cols;
    const std::size_t col = index % cols;
    const float gate = __bfloat162float(in[row * 2 * cols + col]);
    const float up = __bfloat162float(in[row * 2 * cols + cols + col]);
    out[index] = __float2bfloat16(gate / (1.0f + __expf(-gate)) * up);
  }
}

__global__ void add_kernel(const __nv_bfloat162* a, const __nv_bfloat162* b, __nv_bfloat162* out, std::size_t pairs) {
  for (std::size_t index = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x; index < pairs;
       index += std::size_t{gridDim.x} * blockDim.x) {
    out[index] = __hadd2(a[index], b[index]);
  }
}

// Block-wide sum or max of one value per thread (blockDim.x a multiple of 32, at most 1024).
template <bool kMax>
__device__ float block_reduce(float value, float* partial) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const float other = __shfl_down_sync(0xffffffffu, value, offset);
    value = kMax ? fmaxf(value, other) : value + other;
  }
  __syncthreads();  // `partial` may still be read from a previous reduction
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = value;
  __syncthreads();
  if (threadIdx.x < 32) {
    value = threadIdx.x < blockDim.x / 32 ? partial[threadIdx.x] : (kMax ? -INFINITY : 0.0f);
    for (int offset = 16; offset > 0; offset /= 2) {
      const float other = __shfl_down_sync(0xffffffffu, value, offset);
      value = kMax ? fmaxf(value, other) : value + other;
    }
    if (threadIdx.x == 0) partial[0] = value;
  }
  __syncthreads();
  return partial[0];
}

__global__ void causal_softmax_kernel(__nv_bfloat16* scores, int seq_q, int seq_k, float scale) {
  __shared__ float partial[32];
  __nv_bfloat16* row = scores + blockIdx.x * std::size_t(seq_k);
  const int last = static_cast<int>(blockIdx.x % seq_q) + seq_k - seq_q;  // inclusive
  float row_max = -INFINITY;
  for (int key = threadIdx.x; key <= last && key < seq_k; key += blockDim.x) {
    row_max = fmaxf(row_max, __bfloat162float(row[key]) * scale);
  }
  row_max = block_reduce<true>(row_max, partial);
  float sum = 0;
  for (int key = threadIdx.x; key <= last && key < seq_k; key += blockDim.x) {
    sum += __expf(__bfloat162float(row[key]) * scale - row_max);
  }
  sum = block_reduce<false>(sum, partial);
  const float normalizer = sum > 0 ? 1.0f / sum : 0.0f;
  for (int key = threadIdx.x; key < seq_k; key += blockDim.x) {
    const float value = key <= last ? __expf(__bfloat162float(row[key]) * scale - row_max) * normalizer : 0.0f;
    row[key] = __float2bfloat16(value);
  }
}

__device__ std::uint64_t global_time_ns() {
  std::uint64_t time;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(time));
  return time;
}

// Each CTA owns an equal share of the vectors and moves them in 16 KiB chunks (1024 threads x
// 16 bytes), sleeping on the global timer so its share never runs ahead of ctas^-1 of the
// allowed rate. Reduce chunks read both buffers; copy chunks read one.
__global__ void __launch_bounds__(1024)
    collective_proxy_kernel(const uint4* src, uint4* dst, std::size_t buffer_vectors, std::size_t reduce_vectors,
                            std::size_t copy_vectors, double ns_per_vector_per_cta) {
  const std::size_t total = reduce_vectors + copy_vectors;
  const std::size_t share = (total + gridDim.x - 1) / gridDim.x;
  const std::size_t begin = blockIdx.x * share;
  const std::size_t end = min(total, begin + share);
  __shared__ std::uint64_t start_ns;
  if (threadIdx.x == 0) start_ns = global_time_ns();
  __syncthreads();
  for (std::size_t chunk = begin; chunk < end; chunk += blockDim.x) {
    const std::size_t index = chunk + threadIdx.x;
    if (index < end) {
      const std::size_t at = index % buffer_vectors;
      uint4 value = src[at];
      if (index < reduce_vectors) {
        const uint4 other = dst[at];
        auto* lanes = reinterpret_cast<__nv_bfloat162*>(&value);
        const auto* others = reinterpret_cast<const __nv_bfloat162*>(&other);
        for (int lane = 0; lane < 4; ++lane) lanes[lane] = __hadd2(lanes[lane], others[lane]);
      }
      dst[at] = value;
    }
    if (threadIdx.x == 0) {
      const double due_ns = static_cast<double>(chunk + blockDim.x - begin) * ns_per_vector_per_cta;
      while (static_cast<double>(global_time_ns() - start_ns) < due_ns) __nanosleep(500);
    }
    __syncthreads();
  }
}

}  // namespace

void fill_random(void* data, std::size_t count, std::uint64_t seed, Stream stream) {
  fill_random_kernel<<<blocks_for(count, 256), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(data), count, seed);
  check_launch("fill_random");
}

void rmsnorm(const void* x, const void* weight, void* y, std::size_t rows, int cols, Stream stream) {
  rmsnorm_kernel<<<static_cast<unsigned int>(rows), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(x),
                                                                      static_cast<const __nv_bfloat16*>(weight),
                                                                      static_cast<__nv_bfloat16*>(y), cols);
  check_launch("rmsnorm");
}

void rope(void* x, std::size_t rows, int head_dim, std::size_t rows_per_position, Stream stream) {
  rope_kernel<<<blocks_for(rows * head_dim / 2, 256), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(x), rows, head_dim,
                                                                        rows_per_position == 0 ? 1 : rows_per_position);
  check_launch("rope");
}

void swiglu(const void* in, void* out, std::size_t rows, int cols, Stream stream) {
  swiglu_kernel<<<blocks_for(rows * cols, 256), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(in),
                                                                  static_cast<__nv_bfloat16*>(out), rows, cols);
  check_launch("swiglu");
}

void add(const void* a, const void* b, void* out, std::size_t count, Stream stream) {
  add_kernel<<<blocks_for(count / 2, 256), 256, 0, stream>>>(static_cast<const __nv_bfloat162*>(a),
                                                             static_cast<const __nv_bfloat162*>(b),
                                                             static_cast<__nv_bfloat162*>(out), count / 2);
  check_launch("add");
}

void causal_softmax(void* scores, std::size_t rows, int seq_q, int seq_k, float scale, Stream stream) {
  causal_softmax_kernel<<<static_cast<unsigned int>(rows), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(scores), seq_q,
                                                                             seq_k, scale);
  check_launch("causal_softmax");
}

void collective_proxy(const void* src, void* dst, std::size_t buffer_bytes, std::size_t reduce_bytes,
                      std::size_t copy_bytes, int ctas, double max_bytes_per_s, Stream stream) {
  constexpr std::size_t kVector = sizeof(uint4);
  const double ns_per_vector_per_cta = max_bytes_per_s > 0 ? kVector * 1e9 * ctas / max_bytes_per_s : 0.0;
  collective_proxy_kernel<<<ctas, 1024, 0, stream>>>(static_cast<const uint4*>(src), static_cast<uint4*>(dst),
                                                     buffer_bytes / kVector, reduce_bytes / kVector,
                                                     copy_bytes / kVector, ns_per_vector_per_cta);
  check_launch("collective_proxy");
}

}  // namespace kareus::device::cuda
