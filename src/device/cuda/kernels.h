// Private: the CUDA backend's own kernels (kernels.cu), callable from host C++ without CUDA
// headers. Tensors are bf16, row-major; every launcher enqueues on `stream` and throws
// kareus::Error on a launch failure. Shapes are element counts.
#pragma once

#include <cstddef>
#include <cstdint>

struct CUstream_st;

namespace kareus::device::cuda {

using Stream = CUstream_st*;

/// Uniform random bf16 in [-1, 1) (random data, as power depends on it).
void fill_random(void* data, std::size_t count, std::uint64_t seed, Stream stream);
/// y[r, :] = x[r, :] / rms(x[r, :]) * weight, rows x cols.
void rmsnorm(const void* x, const void* weight, void* y, std::size_t rows, int cols, Stream stream);
/// Rotary embedding in place over rows of `head_dim`; row r is at position (r / rows_per_position).
void rope(void* x, std::size_t rows, int head_dim, std::size_t rows_per_position, Stream stream);
/// out[r, c] = silu(in[r, c]) * in[r, cols + c]; in is rows x 2 cols.
void swiglu(const void* in, void* out, std::size_t rows, int cols, Stream stream);
/// out = a + b, count elements.
void add(const void* a, const void* b, void* out, std::size_t count, Stream stream);
/// Causal softmax in place over `rows` rows of `seq_k` scores (rows are [..., seq_q] query rows;
/// query i sits at key position i + seq_k - seq_q, a context-parallel shard holding the last
/// queries, and sees keys up to it); scores are scaled by `scale` first, masked ones become 0.
void causal_softmax(void* scores, std::size_t rows, int seq_q, int seq_k, float scale, Stream stream);
/// The one-GPU collective proxy: exactly `ctas` CTAs of 1024 threads; adds src into dst for
/// `reduce_bytes` and copies for `copy_bytes` (both wrapping over `buffer_bytes` buffers), each
/// CTA pacing itself on the global timer so all together move at most `max_bytes_per_s`.
void collective_proxy(const void* src, void* dst, std::size_t buffer_bytes, std::size_t reduce_bytes,
                      std::size_t copy_bytes, int ctas, double max_bytes_per_s, Stream stream);

}  // namespace kareus::device::cuda
