// kernels.cu: the fused decode kernels of `lab measure --model` (docs/PROTOCOL.md §4.9).
//
// Compiled at run time by NVRTC (lab_shim.cpp, lab_kernels_compile) for the GPU in hand, with
//   -DELEM_BF16=1 or -DELEM_F32=1   the activations' element type;
//   -DHEAD_DIM=<d>                  the width of one head (a multiple of 32, at most 256).
// No header is included (NVRTC's built-in ones differ between releases): bfloat16 is handled
// as its 16 bits, with PyTorch's conversions (c10/util/BFloat16.h: widening is a shift,
// narrowing rounds to nearest even, NaN becomes 0x7FC0).
//
// Every kernel rounds where transformers' modeling_llama.py rounds (each PyTorch op on bf16
// tensors computes in float32 and rounds its result once):
// - residual add `residual + out`: one rounding;
// - LlamaRMSNorm: float32 statistics of the (rounded) input, `x * rsqrt(mean(x^2) + eps)` in
//   float32, rounded, then `weight * that`, rounded;
// - rotary `q * cos + rotate_half(q) * sin`: each product rounded, the sum rounded;
// - SwiGLU `silu(gate) * up`: silu rounded, the product rounded.
// Attention accumulates in float32 and rounds its output once (as SDPA does).

typedef long long i64;

#if defined(ELEM_BF16)
typedef unsigned short elem;
#define ELEM_BYTES 2
__device__ __forceinline__ float ld(elem v) { return __uint_as_float(((unsigned)v) << 16); }
__device__ __forceinline__ elem st(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (elem)0x7fc0u;
  u += 0x7fffu + ((u >> 16) & 1u);
  return (elem)(u >> 16);
}
#elif defined(ELEM_F32)
typedef float elem;
#define ELEM_BYTES 4
__device__ __forceinline__ float ld(elem v) { return v; }
__device__ __forceinline__ elem st(float f) { return f; }
#else
#error "define ELEM_BF16 or ELEM_F32"
#endif

#ifndef HEAD_DIM
#error "define HEAD_DIM"
#endif
#if HEAD_DIM % 32 != 0 || HEAD_DIM > 256
#error "HEAD_DIM must be a multiple of 32, at most 256"
#endif

// Programmatic dependent launch (PTX ISA 7.8 `griddepcontrol`, compute capability 9.0 and up;
// CUDA Programming Guide, "Programmatic Dependent Launch and Synchronization"). Launched with
// the programmatic-stream-serialization attribute (lab_shim.cpp), a kernel may start while the
// kernel before it in the stream still runs; `wait_previous` returns once that kernel has
// completed and its writes are visible, and without the attribute it returns at once. Every
// kernel here waits before it reads or writes anything another kernel touches; only the
// matrix-vector kernels do work before it (reading weights, which no kernel writes).
// `allow_next` lets the kernel after this one launch once every block here has called it.
__device__ __forceinline__ void wait_previous() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void allow_next() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Rounds a float32 value to the element type and back.
__device__ __forceinline__ float rnd(float f) { return ld(st(f)); }

#define FULL_MASK 0xffffffffu
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(FULL_MASK, v, o);
  return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets it.
// `scratch` holds 32 floats; the leading barrier lets a caller reuse it.
__device__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  return warp_sum(lane < warps ? scratch[lane] : 0.f);
}

// One block per row of `width` elements:
//   with `delta`: x[row] = rnd(x[row] + delta[row])  (the residual add, in place);
//   out[row] = rnd(w * rnd(x[row] * rsqrt(mean(x[row]^2) + eps)))  (LlamaRMSNorm).
extern "C" __global__ void add_rms_norm(elem* x, const elem* delta, const elem* w, elem* out,
                                        int width, float eps) {
  __shared__ float scratch[32];
  wait_previous();
  allow_next();
  const i64 base = (i64)blockIdx.x * width;
  elem* xr = x + base;
  elem* orow = out + base;
  float squares = 0.f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    float v = ld(xr[i]);
    if (delta != 0) {
      v = rnd(v + ld(delta[base + i]));
      xr[i] = st(v);
    }
    squares += v * v;
  }
  const float total = block_sum(squares, scratch);
  const float r = rsqrtf(total / (float)width + eps);
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    orow[i] = st(ld(w[i]) * rnd(ld(xr[i]) * r));
  }
}

// out[i] = rnd(rnd(silu(gate)) * up) over `rows` rows of `[gate | up]` (each `2 * inter` wide).
extern "C" __global__ void silu_mul(const elem* gate_up, elem* out, int inter, i64 total) {
  wait_previous();
  allow_next();
  const i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const i64 r = i / inter, c = i - r * inter;
  const elem* row = gate_up + r * 2 * (i64)inter;
  const float g = ld(row[c]);
  const float u = ld(row[inter + c]);
  out[i] = st(rnd(g / (1.f + expf(-g))) * u);
}

#define ATTN_WARPS 16
#define ATTN_CHUNK 8
#define EPL (HEAD_DIM / 32)

// One lane's EPL consecutive elements of a cache row, in one load when they make 4, 8 or 16
// bytes (the row and the lane's offset are then aligned to that size).
#if EPL * ELEM_BYTES == 16
typedef uint4 lane_vec;
#elif EPL * ELEM_BYTES == 8
typedef uint2 lane_vec;
#elif EPL * ELEM_BYTES == 4
typedef unsigned lane_vec;
#endif
union LaneRow {
#ifdef ELEM_BYTES
#if EPL * ELEM_BYTES == 16 || EPL * ELEM_BYTES == 8 || EPL * ELEM_BYTES == 4
  lane_vec v;
#endif
#endif
  elem e[EPL];
};

__device__ __forceinline__ LaneRow load_lane(const elem* p) {
  LaneRow r;
#if EPL * ELEM_BYTES == 16 || EPL * ELEM_BYTES == 8 || EPL * ELEM_BYTES == 4
  r.v = *reinterpret_cast<const lane_vec*>(p);
#else
#pragma unroll
  for (int e = 0; e < EPL; ++e) r.e[e] = p[e];
#endif
  return r;
}

// Decode attention of one new position per sequence over the static cache, with the rotary
// embedding and the cache write of that position folded in. One block of ATTN_WARPS warps per
// (sequence, query head); query head h reads key/value head h / (heads / kv_heads), as
// repeat_kv gives it, without copying the cache.
//   qkv      [batch, (heads + 2 kv_heads) * HEAD_DIM]: this step's projections (q, k, v heads);
//   cache_k, cache_v [batch, kv_heads, context, HEAD_DIM];
//   cos_t, sin_t [context, HEAD_DIM]: the rotary tables (sin carries rotate_half's sign);
//   position [1], int64: the new position (every sequence's);
//   q_norm, k_norm [HEAD_DIM] or null: per-head RMSNorm before the rotary embedding (Qwen3);
//   out      [batch, heads * HEAD_DIM];
//   window   0 for full attention, else keys j with j > position - window (sliding layers).
// The block of the first query head of a group writes the rotated key and the value into the
// cache at `position`; every block uses its own copy of them for that position and reads the
// cache only before it, so no block waits for another.
extern "C" __global__ void __launch_bounds__(ATTN_WARPS * 32)
    decode_attention(const elem* qkv, elem* cache_k, elem* cache_v, const elem* cos_t,
                     const elem* sin_t, const i64* position, const elem* q_norm,
                     const elem* k_norm, elem* out, int heads, int kv_heads, int context,
                     int window, float scale, float eps) {
  __shared__ float scratch[32];
  __shared__ float q_raw[HEAD_DIM], k_raw[HEAD_DIM];
  __shared__ __align__(16) elem k_new[HEAD_DIM];
  __shared__ __align__(16) elem v_new[HEAD_DIM];
  __shared__ float q_rot[HEAD_DIM];
  __shared__ float warp_max[ATTN_WARPS], warp_sum_[ATTN_WARPS];
  __shared__ float warp_acc[ATTN_WARPS][HEAD_DIM];

  wait_previous();
  allow_next();
  const int b = blockIdx.x / heads, h = blockIdx.x - b * heads;
  const int group = heads / kv_heads, g = h / group;
  const i64 pos = *position;
  const int t = threadIdx.x;
  const elem* row = qkv + (i64)b * (heads + 2 * kv_heads) * HEAD_DIM;
  const elem* qh = row + (i64)h * HEAD_DIM;
  const elem* kh = row + (i64)(heads + g) * HEAD_DIM;
  const elem* vh = row + (i64)(heads + kv_heads + g) * HEAD_DIM;

  float qv = 0.f, kv = 0.f;
  if (t < HEAD_DIM) {
    qv = ld(qh[t]);
    kv = ld(kh[t]);
  }
  if (q_norm != 0) {
    const float sq = block_sum(qv * qv, scratch);
    const float sk = block_sum(kv * kv, scratch);
    if (t < HEAD_DIM) {
      qv = rnd(ld(q_norm[t]) * rnd(qv * rsqrtf(sq / (float)HEAD_DIM + eps)));
      kv = rnd(ld(k_norm[t]) * rnd(kv * rsqrtf(sk / (float)HEAD_DIM + eps)));
    }
  }
  if (t < HEAD_DIM) {
    q_raw[t] = qv;
    k_raw[t] = kv;
  }
  __syncthreads();
  const i64 cache_base = ((i64)b * kv_heads + g) * context * HEAD_DIM;
  if (t < HEAD_DIM) {
    const int o = (t + HEAD_DIM / 2) % HEAD_DIM;
    const float c = ld(cos_t[pos * HEAD_DIM + t]);
    const float s = ld(sin_t[pos * HEAD_DIM + t]);
    const float qr = rnd(rnd(q_raw[t] * c) + rnd(q_raw[o] * s));
    const elem kr = st(rnd(k_raw[t] * c) + rnd(k_raw[o] * s));
    q_rot[t] = qr;
    k_new[t] = kr;
    v_new[t] = vh[t];
    if (h % group == 0) {
      cache_k[cache_base + pos * HEAD_DIM + t] = kr;
      cache_v[cache_base + pos * HEAD_DIM + t] = vh[t];
    }
  }
  __syncthreads();

  const int warp = t >> 5, lane = t & 31;
  float q[EPL], acc[EPL];
#pragma unroll
  for (int e = 0; e < EPL; ++e) {
    q[e] = q_rot[lane * EPL + e];
    acc[e] = 0.f;
  }
  i64 lo = 0;
  if (window > 0) {
    lo = pos - window + 1;
    if (lo < 0) lo = 0;
  }
  const elem* kbase = cache_k + cache_base;
  const elem* vbase = cache_v + cache_base;
  float m = NEG_INF, l = 0.f;
  // Each warp takes ATTN_CHUNK consecutive keys at a time: their key and value rows are loaded
  // together (independent loads in flight), then the scores, one rescale per chunk.
  for (i64 j0 = lo + (i64)warp * ATTN_CHUNK; j0 <= pos; j0 += (i64)ATTN_WARPS * ATTN_CHUNK) {
    LaneRow kk[ATTN_CHUNK], vv[ATTN_CHUNK];
#pragma unroll
    for (int c = 0; c < ATTN_CHUNK; ++c) {
      const i64 j = j0 + c;
      if (j < pos) {
        kk[c] = load_lane(kbase + j * HEAD_DIM + lane * EPL);
        vv[c] = load_lane(vbase + j * HEAD_DIM + lane * EPL);
      } else if (j == pos) {
        kk[c] = load_lane(k_new + lane * EPL);
        vv[c] = load_lane(v_new + lane * EPL);
      } else {
#pragma unroll
        for (int e = 0; e < EPL; ++e) {
          kk[c].e[e] = st(0.f);
          vv[c].e[e] = st(0.f);
        }
      }
    }
    float s[ATTN_CHUNK];
#pragma unroll
    for (int c = 0; c < ATTN_CHUNK; ++c) {
      s[c] = 0.f;
#pragma unroll
      for (int e = 0; e < EPL; ++e) s[c] += q[e] * ld(kk[c].e[e]);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
      for (int c = 0; c < ATTN_CHUNK; ++c) s[c] += __shfl_xor_sync(FULL_MASK, s[c], o);
    }
    float mn = m;
#pragma unroll
    for (int c = 0; c < ATTN_CHUNK; ++c) {
      s[c] = j0 + c <= pos ? s[c] * scale : NEG_INF;
      mn = fmaxf(mn, s[c]);
    }
    const float corr = __expf(m - mn);
    l *= corr;
#pragma unroll
    for (int e = 0; e < EPL; ++e) acc[e] *= corr;
#pragma unroll
    for (int c = 0; c < ATTN_CHUNK; ++c) {
      const float p = __expf(s[c] - mn);
      l += p;
#pragma unroll
      for (int e = 0; e < EPL; ++e) acc[e] = fmaf(p, ld(vv[c].e[e]), acc[e]);
    }
    m = mn;
  }
  if (lane == 0) {
    warp_max[warp] = m;
    warp_sum_[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < EPL; ++e) warp_acc[warp][lane * EPL + e] = acc[e];
  __syncthreads();
  if (t < HEAD_DIM) {
    float mx = NEG_INF;
#pragma unroll
    for (int w = 0; w < ATTN_WARPS; ++w) mx = fmaxf(mx, warp_max[w]);
    float total = 0.f, value = 0.f;
#pragma unroll
    for (int w = 0; w < ATTN_WARPS; ++w) {
      const float f = warp_sum_[w] > 0.f ? __expf(warp_max[w] - mx) : 0.f;
      total += warp_sum_[w] * f;
      value += warp_acc[w][t] * f;
    }
    out[((i64)b * heads + h) * HEAD_DIM + t] = st(value / total);
  }
}

#define GEMV_WARPS 8
#ifndef GEMV_PREFETCH
#define GEMV_PREFETCH 8
#endif
#if GEMV_PREFETCH < 0 || GEMV_PREFETCH > 16
#error "GEMV_PREFETCH must be 0 to 16"
#endif
#define VEC (16 / (int)sizeof(elem))

// 16 bytes of weights, read once: no L1 allocation (the matrix is streamed).
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// The dot product of two 16-byte vectors of elements, in float32.
__device__ __forceinline__ float dot16(uint4 a, uint4 b) {
#if defined(ELEM_BF16)
  const unsigned aw[4] = {a.x, a.y, a.z, a.w}, bw[4] = {b.x, b.y, b.z, b.w};
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    s = fmaf(__uint_as_float(aw[i] << 16), __uint_as_float(bw[i] << 16), s);
    s = fmaf(__uint_as_float(aw[i] & 0xffff0000u), __uint_as_float(bw[i] & 0xffff0000u), s);
  }
  return s;
#else
  float s = __uint_as_float(a.x) * __uint_as_float(b.x);
  s = fmaf(__uint_as_float(a.y), __uint_as_float(b.y), s);
  s = fmaf(__uint_as_float(a.z), __uint_as_float(b.z), s);
  return fmaf(__uint_as_float(a.w), __uint_as_float(b.w), s);
#endif
}

// Matrix-vector product for one sequence: y[n] = W[n, :]·x + bias[n], one warp per output row,
// 16-byte loads (k a multiple of VEC, W and x 16-byte aligned). With SWIGLU, W is [gate; up]
// (2·rows rows) and y[n] = rnd(silu(g_n)) · u_n with g and u rounded as the products' outputs.
// (Measured on the H200, examples/h200/measure-model/run5: doing the residual add + RMSNorm in
// each block of the product instead of one kernel before it made the Llama-3.1-8B step slower,
// 4.90 against 4.63 ms, so the norm stays its own kernel.)
template <bool SWIGLU>
__device__ __forceinline__ void gemv_body(const elem* W, const elem* x, const elem* bias,
                                          elem* y, int rows, int k) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n = blockIdx.x * GEMV_WARPS + warp;
  const bool live = n < rows;
  const int chunks = k / VEC;
  const uint4* wr = reinterpret_cast<const uint4*>(W + (i64)(live ? n : 0) * k);
  const uint4* wu = reinterpret_cast<const uint4*>(W + (i64)((live ? n : 0) + rows) * k);
  // No kernel writes the weights, so each lane reads its first GEMV_PREFETCH vectors before
  // waiting for the kernel that writes `x`: the stream of weights starts while that kernel
  // (a one-block RMSNorm, or attention on a few dozen blocks) still runs.
  uint4 pre[GEMV_PREFETCH > 0 ? GEMV_PREFETCH : 1], pre_up[GEMV_PREFETCH > 0 ? GEMV_PREFETCH : 1];
#pragma unroll
  for (int j = 0; j < GEMV_PREFETCH; ++j) {
    const int c = lane + 32 * j;
    if (live && c < chunks) {
      pre[j] = load_stream(wr + c);
      if (SWIGLU) pre_up[j] = load_stream(wu + c);
    }
  }
  wait_previous();
  allow_next();
  if (!live) return;
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  float acc = 0.f, acc_up = 0.f;
#pragma unroll
  for (int j = 0; j < GEMV_PREFETCH; ++j) {
    const int c = lane + 32 * j;
    if (c < chunks) {
      const uint4 xv = __ldg(xr + c);
      acc += dot16(pre[j], xv);
      if (SWIGLU) acc_up += dot16(pre_up[j], xv);
    }
  }
#pragma unroll 4
  for (int c = lane + 32 * GEMV_PREFETCH; c < chunks; c += 32) {
    const uint4 xv = __ldg(xr + c);
    acc += dot16(load_stream(wr + c), xv);
    if (SWIGLU) acc_up += dot16(load_stream(wu + c), xv);
  }
  acc = warp_sum(acc);
  if (SWIGLU) acc_up = warp_sum(acc_up);
  if (lane != 0) return;
  if (SWIGLU) {
    const float g = rnd(acc + (bias != 0 ? ld(bias[n]) : 0.f));
    const float u = rnd(acc_up + (bias != 0 ? ld(bias[n + rows]) : 0.f));
    y[n] = st(rnd(g / (1.f + expf(-g))) * u);
  } else {
    y[n] = st(acc + (bias != 0 ? ld(bias[n]) : 0.f));
  }
}

extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv(const elem* W, const elem* x, const elem* bias, elem* y, int rows, int k) {
  gemv_body<false>(W, x, bias, y, rows, k);
}

extern "C" __global__ void __launch_bounds__(GEMV_WARPS * 32)
    gemv_swiglu(const elem* W, const elem* x, const elem* bias, elem* y, int rows, int k) {
  gemv_body<true>(W, x, bias, y, rows, k);
}
