//! The fused decode kernels (`kernels.cu`): compiled by NVRTC when a model is loaded on a GPU,
//! launched on libtorch's current stream (so a CUDA-graph capture records them).
//!
//! A decode step at batch 1 is memory-bound on the weights, and every small kernel between
//! the matrix products costs a few microseconds however little it touches
//! (`examples/h200/measure-model/run3/`: 13 of them per layer, 1.27 ms of a 5.52 ms step).
//! Three kernels leave four per layer: residual add + RMSNorm (twice), rotary + cache write +
//! grouped-query attention over the static cache, and SiLU·mul; at batch 1 two more replace
//! cuBLAS's products (`gemv`, and `gemv_swiglu` with SiLU·mul folded in), which leaves seven
//! kernels per layer in all (`examples/h200/measure-model/run5/` times each step of this).
//! They run only for steps of one new position per sequence ([`super::Decoder::forward`]);
//! prefill and the CPU keep the libtorch path, and so does every model they do not cover
//! ([`Kernels::unsupported`]).

use super::Step;
use std::ffi::{c_char, c_void, CStr, CString};
use tch::{Kind, Tensor};

extern "C" {
    fn lab_kernels_compile(
        source: *const c_char,
        options: *const *const c_char,
        n_options: i32,
        err: *mut c_char,
        len: usize,
    ) -> *mut c_void;
    fn lab_kernels_function(
        module: *mut c_void,
        name: *const c_char,
        err: *mut c_char,
        len: usize,
    ) -> *mut c_void;
    fn lab_kernels_launch(
        function: *mut c_void,
        grid: u32,
        block: u32,
        shared_bytes: u32,
        args: *mut *mut c_void,
        overlap: i32,
        err: *mut c_char,
        len: usize,
    ) -> i32;
}

/// The CUDA source, compiled per model (element type and head width are compile-time).
const SOURCE: &str = include_str!("kernels.cu");
/// Threads of `decode_attention` (`ATTN_WARPS` × 32 in `kernels.cu`).
const ATTENTION_THREADS: u32 = 16 * 32;
/// Threads of `add_rms_norm`.
const NORM_THREADS: u32 = 512;
/// Threads of `silu_mul`.
const SILU_THREADS: u32 = 256;
/// Threads of `gemv` and `gemv_swiglu` (`GEMV_WARPS` × 32: one warp per output row).
const GEMV_THREADS: u32 = 8 * 32;
/// `libtorch` keeps the decode steps on libtorch's kernels; `cublas` keeps cuBLAS's matrix
/// products at batch 1 too (by default batch 1 runs `kernels.cu`'s matrix-vector products).
pub const SWITCH: &str = "LAB_DECODE_KERNELS";
/// `off` launches every kernel plainly; by default, on compute capability 9.0 and up, each
/// launch lets the kernel start while the previous one ends (programmatic dependent launch:
/// `wait_previous` in `kernels.cu`), and the matrix-vector kernels start streaming weights then.
pub const OVERLAP_SWITCH: &str = "LAB_DECODE_OVERLAP";
/// Vectors of 16 bytes each lane of a matrix-vector kernel reads before it waits for the
/// previous kernel (`GEMV_PREFETCH` in `kernels.cu`); 8 unless set (measured best of 0, 4
/// and 8 on the H200, `examples/h200/measure-model/run6/`), 0 to 16.
pub const PREFETCH_SWITCH: &str = "LAB_DECODE_PREFETCH";

/// The kernels of one compiled module (the module lives as long as the process).
pub struct Kernels {
    add_rms_norm: *mut c_void,
    attention: *mut c_void,
    silu_mul: *mut c_void,
    gemv: *mut c_void,
    gemv_swiglu: *mut c_void,
    /// Whether batch-1 steps run the `gemv` kernels (else cuBLAS through libtorch).
    pub own_gemv: bool,
    /// Whether launches overlap the previous kernel's end ([`OVERLAP_SWITCH`]).
    overlap: bool,
    /// Bytes of one element.
    elem_bytes: i64,
    /// What the document says ran: "fused (NVRTC, sm_90, bfloat16, head_dim 128)".
    pub description: String,
}

/// A pointer-sized kernel argument, kept alive until the launch returns.
enum Arg {
    Ptr(*mut c_void),
    I32(i32),
    I64(i64),
    F32(f32),
}

fn ptr(t: &Tensor) -> Arg {
    Arg::Ptr(t.data_ptr())
}

fn null() -> Arg {
    Arg::Ptr(std::ptr::null_mut())
}

fn int(v: i64) -> Step<Arg> {
    i32::try_from(v)
        .map(Arg::I32)
        .map_err(|_| format!("kernel argument {v} does not fit 32 bits"))
}

fn call(f: impl FnOnce(*mut c_char, usize) -> i32) -> Step<()> {
    crate::shim(f)
}

impl Kernels {
    /// Why the fused kernels cannot run this model in `kind`, or `None` when they can.
    pub fn unsupported(head_dim: u64, kind: Kind) -> Option<String> {
        if !matches!(kind, Kind::BFloat16 | Kind::Float) {
            return Some(format!(
                "{kind:?} (the fused kernels run bfloat16 and float32)"
            ));
        }
        if !head_dim.is_multiple_of(32) || head_dim > 256 {
            return Some(format!(
                "head_dim {head_dim} (the fused kernels need a multiple of 32, at most 256)"
            ));
        }
        None
    }

    /// Compiles the kernels for compute capability `major.minor`, `kind` and `head_dim`.
    ///
    /// # Errors
    /// NVRTC or the driver library missing, a compile error (NVRTC's log), a kernel missing.
    pub fn compile(
        kind: Kind,
        head_dim: u64,
        major: i64,
        minor: i64,
        own_gemv: bool,
    ) -> Step<Self> {
        if let Some(why) = Self::unsupported(head_dim, kind) {
            return Err(why);
        }
        let element = if kind == Kind::BFloat16 {
            "-DELEM_BF16=1"
        } else {
            "-DELEM_F32=1"
        };
        let arch = format!("--gpu-architecture=sm_{major}{minor}");
        let prefetch = match std::env::var(PREFETCH_SWITCH) {
            Err(_) => 8,
            Ok(v) => v.parse::<u32>().ok().filter(|n| *n <= 16).ok_or_else(|| {
                format!("{PREFETCH_SWITCH}={v:?}: give a whole number from 0 to 16")
            })?,
        };
        let overlap = major >= 9 && std::env::var(OVERLAP_SWITCH).as_deref() != Ok("off");
        let options: Vec<CString> = [
            element.to_owned(),
            format!("-DHEAD_DIM={head_dim}"),
            format!("-DGEMV_PREFETCH={prefetch}"),
            arch.clone(),
            "--std=c++17".to_owned(),
            "-default-device".to_owned(),
        ]
        .into_iter()
        .map(|o| CString::new(o).map_err(|e| e.to_string()))
        .collect::<Step<_>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let source = CString::new(SOURCE).map_err(|e| e.to_string())?;
        let mut module = std::ptr::null_mut();
        // SAFETY: the strings outlive the call; the shim returns a module or null with a message.
        call(|e, l| {
            module = unsafe {
                lab_kernels_compile(
                    source.as_ptr(),
                    pointers.as_ptr(),
                    pointers.len() as i32,
                    e,
                    l,
                )
            };
            i32::from(module.is_null())
        })?;
        let function = |name: &CStr| -> Step<*mut c_void> {
            let mut f = std::ptr::null_mut();
            // SAFETY: `module` is a loaded module; the name is NUL-terminated.
            call(|e, l| {
                f = unsafe { lab_kernels_function(module, name.as_ptr(), e, l) };
                i32::from(f.is_null())
            })?;
            Ok(f)
        };
        Ok(Kernels {
            add_rms_norm: function(c"add_rms_norm")?,
            attention: function(c"decode_attention")?,
            silu_mul: function(c"silu_mul")?,
            gemv: function(c"gemv")?,
            gemv_swiglu: function(c"gemv_swiglu")?,
            own_gemv,
            overlap,
            elem_bytes: if kind == Kind::BFloat16 { 2 } else { 4 },
            description: format!(
                "fused kernels (NVRTC, sm_{major}{minor}, {}, head_dim {head_dim}): residual add + RMSNorm, rotary + cache write + attention, SiLU·mul{}{}",
                if kind == Kind::BFloat16 { "bfloat16" } else { "float32" },
                if own_gemv {
                    "; at batch 1 the matrix products by matrix-vector kernels, SiLU·mul in the gate/up one"
                } else {
                    "; matrix products by cuBLAS"
                },
                if overlap {
                    format!("; programmatic dependent launch, {prefetch} weight vectors per lane read before the wait")
                } else {
                    String::new()
                }
            ),
        })
    }

    fn launch(&self, function: *mut c_void, grid: i64, block: u32, args: &mut [Arg]) -> Step<()> {
        let grid = u32::try_from(grid).map_err(|_| format!("grid of {grid} blocks"))?;
        let mut pointers: Vec<*mut c_void> = args
            .iter_mut()
            .map(|a| match a {
                Arg::Ptr(p) => p as *mut *mut c_void as *mut c_void,
                Arg::I32(v) => v as *mut i32 as *mut c_void,
                Arg::I64(v) => v as *mut i64 as *mut c_void,
                Arg::F32(v) => v as *mut f32 as *mut c_void,
            })
            .collect();
        // SAFETY: each pointer points at a live argument of the kernel's parameter type, in
        // the kernel's order (kernels.cu); tensors are alive and on the current device.
        call(|e, l| unsafe {
            lab_kernels_launch(
                function,
                grid,
                block,
                0,
                pointers.as_mut_ptr(),
                i32::from(self.overlap),
                e,
                l,
            )
        })
    }

    /// `x += delta` (when given), then `out = RMSNorm(x) · weight`, per row of `x`
    /// (`[rows…, width]`, contiguous; `out` the same shape).
    pub fn add_rms_norm(
        &self,
        x: &Tensor,
        delta: Option<&Tensor>,
        weight: &Tensor,
        out: &Tensor,
        eps: f64,
    ) -> Step<()> {
        let width = x.size().last().copied().unwrap_or(0);
        let rows = x.numel() as i64 / width.max(1);
        let mut args = [
            ptr(x),
            delta.map_or_else(null, ptr),
            ptr(weight),
            ptr(out),
            int(width)?,
            Arg::F32(eps as f32),
        ];
        self.launch(self.add_rms_norm, rows, NORM_THREADS, &mut args)
    }

    /// Whether the `gemv` kernels can take `weight` (`[rows, k]`): contiguous, 16-byte
    /// aligned, rows of whole 16-byte vectors.
    pub fn gemv_fits(&self, weight: &Tensor) -> bool {
        let k = weight.size().last().copied().unwrap_or(0);
        k > 0
            && (k * self.elem_bytes) % 16 == 0
            && weight.is_contiguous()
            && (weight.data_ptr() as usize).is_multiple_of(16)
    }

    /// `out = weight · x + bias` for one sequence (`out` has `rows` elements; `x` and `out`
    /// contiguous and 16-byte aligned, as the caching allocator's blocks are); with `swiglu`,
    /// `weight` is `[gate; up]` (`2·rows` rows) and `out = silu(gate·x) · (up·x)`.
    pub fn gemv(
        &self,
        weight: &Tensor,
        x: &Tensor,
        bias: Option<&Tensor>,
        out: &Tensor,
        swiglu: bool,
    ) -> Step<()> {
        let size = weight.size();
        let (rows, k) = (size[0] / if swiglu { 2 } else { 1 }, size[1]);
        let mut args = [
            ptr(weight),
            ptr(x),
            bias.map_or_else(null, ptr),
            ptr(out),
            int(rows)?,
            int(k)?,
        ];
        let f = if swiglu { self.gemv_swiglu } else { self.gemv };
        self.launch(f, (rows + 7) / 8, GEMV_THREADS, &mut args)
    }

    /// `out = silu(gate) · up` of `gate_up` (`[rows…, 2·inter]`, gate first) into `out`
    /// (`[rows…, inter]`).
    pub fn silu_mul(&self, gate_up: &Tensor, out: &Tensor) -> Step<()> {
        let inter = out.size().last().copied().unwrap_or(0);
        let total = out.numel() as i64;
        let mut args = [ptr(gate_up), ptr(out), int(inter)?, Arg::I64(total)];
        let grid = (total + i64::from(SILU_THREADS) - 1) / i64::from(SILU_THREADS);
        self.launch(self.silu_mul, grid, SILU_THREADS, &mut args)
    }

    /// One decode position's attention per sequence, its key (rotated) and value written into
    /// the cache at `position` first; see `decode_attention` in `kernels.cu` for the layouts.
    #[allow(clippy::too_many_arguments)]
    pub fn attention(
        &self,
        qkv: &Tensor,
        keys: &Tensor,
        values: &Tensor,
        rope: (&Tensor, &Tensor),
        position: &Tensor,
        qk_norm: Option<(&Tensor, &Tensor)>,
        out: &Tensor,
        shape: AttentionShape,
    ) -> Step<()> {
        let context = keys.size().get(2).copied().unwrap_or(0);
        let (qn, kn) = match qk_norm {
            Some((q, k)) => (ptr(q), ptr(k)),
            None => (null(), null()),
        };
        let mut args = [
            ptr(qkv),
            ptr(keys),
            ptr(values),
            ptr(rope.0),
            ptr(rope.1),
            ptr(position),
            qn,
            kn,
            ptr(out),
            int(shape.heads)?,
            int(shape.kv_heads)?,
            int(context)?,
            int(shape.window.unwrap_or(0))?,
            Arg::F32(shape.scale as f32),
            Arg::F32(shape.eps as f32),
        ];
        self.launch(
            self.attention,
            shape.batch * shape.heads,
            ATTENTION_THREADS,
            &mut args,
        )
    }
}

/// The sizes `decode_attention` needs besides its tensors.
#[derive(Clone, Copy)]
pub struct AttentionShape {
    /// Sequences.
    pub batch: i64,
    /// Query heads.
    pub heads: i64,
    /// Key/value heads.
    pub kv_heads: i64,
    /// The layer's sliding window, `None` for full attention.
    pub window: Option<i64>,
    /// Softmax scale (`head_dim^-0.5`).
    pub scale: f64,
    /// `rms_norm_eps` of the per-head norms.
    pub eps: f64,
}
