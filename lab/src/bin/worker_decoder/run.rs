//! The model-measurement phases (`docs/PROTOCOL.md §4.9`) and the test-only CPU logits probe.
//!
//! Each row is one protocol step as in §4.2: synchronize, baseline counters, reset the peaks,
//! start event, work, end event, synchronize, wall time, end and peak counters. The step's
//! result stays alive until its row is read, then is freed (the next step starts from it).

use super::{err, Cache, ContextTensors, DecodeState, Decoder, WeightsFrom};
use crate::{synchronize, Graph, SideStream};
use lab::document::model_run::{ModelPhase, ModelPhaseRow};
use lab::document::Dtype;
use lab::worker::{Logits, LogitsProbe, ModelRun};
use tch::{Device, Kind, Tensor};

type Step<T> = Result<T, String>;

/// Decode steps run on the side stream before a capture (PyTorch's documented example runs
/// three warm-up iterations before `torch.cuda.graph`).
pub const GRAPH_WARMUP_STEPS: u64 = 3;

/// A failure with the phase it happened in.
pub struct ModelFailure {
    /// The phase's document name.
    pub phase: &'static str,
    /// One line.
    pub message: String,
}

/// The libtorch element kind of a dtype.
pub fn kind_of(dtype: Dtype) -> Kind {
    match dtype {
        Dtype::Float32 => Kind::Float,
        Dtype::Float16 => Kind::Half,
        Dtype::Bfloat16 => Kind::BFloat16,
    }
}

fn row<T>(
    device: i64,
    phase: ModelPhase,
    repetition: Option<u64>,
    tokens: u64,
    work: impl FnOnce() -> Step<T>,
) -> Result<(ModelPhaseRow, T), ModelFailure> {
    let (t, result) = crate::timed(device, work).map_err(|message| ModelFailure {
        phase: phase.as_str(),
        message,
    })?;
    let c = t.counters;
    let row = ModelPhaseRow {
        phase,
        repetition,
        tokens,
        wall_seconds: t.wall_seconds,
        gpu_seconds: t.gpu_seconds,
        baseline_allocated_bytes: c.baseline_allocated_bytes,
        baseline_reserved_bytes: c.baseline_reserved_bytes,
        end_allocated_bytes: c.end_allocated_bytes,
        end_reserved_bytes: c.end_reserved_bytes,
        peak_allocated_bytes: c.peak_allocated_bytes,
        peak_reserved_bytes: c.peak_reserved_bytes,
    };
    Ok((row, result))
}

/// Runs every phase of `run` on `cuda:index`; the rows in order, and what ran the decode
/// steps' small operations ([`Decoder::decode_kernels`]).
pub fn measure(run: &ModelRun) -> Result<(Vec<ModelPhaseRow>, String), ModelFailure> {
    let _inference = crate::InferenceMode::enter();
    let index = run.device_index;
    let device = Device::Cuda(index as usize);
    let dev = i64::from(index);
    let w = &run.workload;
    let kind = kind_of(w.dtype);
    let early = |message: String| ModelFailure {
        phase: ModelPhase::ModelLoad.as_str(),
        message,
    };
    let seed = i64::try_from(w.seed).map_err(|e| early(e.to_string()))?;
    let batch = i64::try_from(w.batch).map_err(|e| early(e.to_string()))?;
    let input = i64::try_from(w.input_tokens).map_err(|e| early(e.to_string()))?;
    let vocab = i64::try_from(run.spec.vocab).map_err(|e| early(e.to_string()))?;
    let mut rows = Vec::new();

    tch::manual_seed(seed);
    let from = match &run.sources {
        Some(s) => WeightsFrom::Files(s),
        None => WeightsFrom::Random,
    };
    let (r, model) = row(dev, ModelPhase::ModelLoad, None, 0, || {
        Decoder::load(&run.spec, kind, device, from)
    })?;
    rows.push(r);
    let (r, prompt) = row(dev, ModelPhase::Inputs, None, 0, || {
        let ids = Tensor::f_randint(vocab, [batch, input], (Kind::Int64, device)).map_err(err)?;
        let positions = Tensor::f_arange(input, (Kind::Int64, device)).map_err(err)?;
        let context = i64::try_from(w.context).map_err(|e| e.to_string())?;
        Ok((ids, positions, ContextTensors::new(&model, context)?))
    })?;
    rows.push(r);
    let (ids, positions, context_tensors) = prompt;
    let (r, mut cache) = row(dev, ModelPhase::KvCache, None, 0, || {
        Cache::new(&model, w.batch, w.context, context_tensors)
    })?;
    rows.push(r);
    let prefill = |cache: &mut Cache| model.forward(&ids, &positions, cache, false);
    let (r, logits) = row(dev, ModelPhase::ColdPrefill, None, w.input_tokens, || {
        prefill(&mut cache)
    })?;
    rows.push(r);
    drop(logits);
    let (r, last) = row(
        dev,
        ModelPhase::Warmup,
        None,
        w.input_tokens * w.warmup,
        || {
            let mut last: Option<Tensor> = None;
            for _ in 0..w.warmup {
                drop(last.take());
                last = Some(prefill(&mut cache)?);
            }
            Ok(last)
        },
    )?;
    rows.push(r);
    drop(last);
    let mut logits = None;
    for repetition in 1..=w.repeats {
        drop(logits.take());
        let (r, l) = row(
            dev,
            ModelPhase::WarmPrefill,
            Some(repetition),
            w.input_tokens,
            || prefill(&mut cache),
        )?;
        rows.push(r);
        logits = Some(l);
    }
    // The first generated token: the greedy choice of the last prefill.
    let first = |logits: &Tensor| -> Step<DecodeState> {
        Ok(DecodeState {
            ids: logits.f_argmax(-1, false).map_err(err)?,
            position: Tensor::f_full([1], input, (Kind::Int64, device)).map_err(err)?,
        })
    };
    let last_logits = logits.ok_or_else(|| early("no warm prefill ran".into()))?;
    let mut state = first(&last_logits).map_err(|m| ModelFailure {
        phase: ModelPhase::Decode.as_str(),
        message: m,
    })?;
    let start_ids = state
        .ids
        .f_detach_copy()
        .map_err(err)
        .map_err(|m| ModelFailure {
            phase: ModelPhase::Decode.as_str(),
            message: m,
        })?;
    drop(last_logits);
    let mut out = None;
    for step in 1..=w.output_tokens {
        drop(out.take());
        let (r, l) = row(dev, ModelPhase::Decode, Some(step), 1, || {
            state.step(&model, &mut cache)
        })?;
        rows.push(r);
        out = Some(l);
    }
    drop(out);
    if w.graph {
        graph_decode(
            dev,
            &model,
            &mut cache,
            &mut state,
            &start_ids,
            input,
            w.output_tokens,
            &mut rows,
        )?;
    }
    let kernels = model.decode_kernels.clone();
    drop((state, cache, ids, positions, model));
    Ok((rows, kernels))
}

/// `--graph`: capture one decode step and replay it `steps` times, one row per replay.
#[allow(clippy::too_many_arguments)]
fn graph_decode(
    dev: i64,
    model: &Decoder,
    cache: &mut Cache,
    state: &mut DecodeState,
    start_ids: &Tensor,
    input: i64,
    steps: u64,
    rows: &mut Vec<ModelPhaseRow>,
) -> Result<(), ModelFailure> {
    let reset = |state: &mut DecodeState| -> Step<()> {
        state.ids.f_copy_(start_ids).map_err(err)?;
        let _ = state.position.f_fill_(input).map_err(err)?;
        Ok(())
    };
    let (r, (graph, logits)) = row(dev, ModelPhase::GraphCapture, None, 1, || {
        let graph = Graph::new()?;
        let _side = SideStream::enter(dev)?;
        reset(state)?;
        for _ in 0..GRAPH_WARMUP_STEPS {
            drop(state.step(model, cache)?);
        }
        reset(state)?;
        synchronize()?;
        graph.capture_begin()?;
        let captured = state.step(model, cache);
        let ended = graph.capture_end();
        let captured = captured?;
        ended?;
        // Capture records the step without running it: the position is still the input's.
        Ok((graph, captured))
    })?;
    rows.push(r);
    for step in 1..=steps {
        let (r, ()) = row(dev, ModelPhase::GraphDecode, Some(step), 1, || {
            graph.replay()
        })?;
        rows.push(r);
    }
    drop(logits);
    drop(graph);
    Ok(())
}

/// The test-only CPU probe: prefill logits for every prompt position, then one step per
/// entry of `probe.steps` with the given tokens.
pub fn cpu_logits(probe: &LogitsProbe) -> Step<Logits> {
    let _inference = crate::InferenceMode::enter();
    let folder = &probe.model;
    let read = lab::plan::model::read(folder).map_err(|e| e.to_string())?;
    let spec = lab::decoder::from_model(&read).map_err(|e| e.to_string())?;
    let sources = lab::decoder::weights::locate(folder, &spec).map_err(|e| e.to_string())?;
    let kind = kind_of(probe.dtype);
    let device = match probe.device_index {
        Some(n) => Device::Cuda(n as usize),
        None => Device::Cpu,
    };
    let model = Decoder::load(&spec, kind, device, WeightsFrom::Files(&sources))?;
    let batch = probe.prompt.len() as i64;
    let t = probe.prompt.first().map_or(0, Vec::len) as i64;
    let flat: Vec<i64> = probe.prompt.iter().flatten().copied().collect();
    let on = |x: Tensor| x.f_to(device).map_err(err);
    let ids = on(Tensor::f_from_slice(&flat)
        .map_err(err)?
        .f_view([batch, t])
        .map_err(err)?)?;
    let context = (t as u64) + probe.steps.len() as u64 + probe.greedy.saturating_sub(1);
    let with = ContextTensors::new(&model, context as i64)?;
    let mut cache = Cache::new(&model, batch as u64, context, with)?;
    let positions = Tensor::f_arange(t, (Kind::Int64, device)).map_err(err)?;
    let to_vec = |x: &Tensor| -> Step<Vec<f32>> {
        let x = x
            .f_to_dtype(Kind::Float, false, false)
            .map_err(err)?
            .f_to(Device::Cpu)
            .map_err(err)?
            .f_contiguous()
            .map_err(err)?;
        let n = x.numel();
        let mut out = vec![0f32; n];
        x.f_copy_data(&mut out, n).map_err(err)?;
        Ok(out)
    };
    let prefill = to_vec(&model.forward(&ids, &positions, &mut cache, true)?)?;
    let mut steps = Vec::new();
    let mut last = None;
    for (s, tokens) in probe.steps.iter().enumerate() {
        let ids = on(Tensor::f_from_slice(tokens)
            .map_err(err)?
            .f_view([batch, 1])
            .map_err(err)?)?;
        let position = on(Tensor::f_from_slice(&[t + s as i64]).map_err(err)?)?;
        let logits = model.forward(&ids, &position, &mut cache, false)?;
        steps.push(to_vec(&logits)?);
        last = Some(logits);
    }
    let mut greedy_tokens = vec![Vec::new(); batch as usize];
    if let (Some(logits), true) = (last, probe.greedy > 0) {
        let mut state = DecodeState {
            ids: logits.f_argmax(-1, false).map_err(err)?,
            position: on(Tensor::f_from_slice(&[t + probe.steps.len() as i64]).map_err(err)?)?,
        };
        for g in 0..probe.greedy {
            if g > 0 {
                drop(state.step(&model, &mut cache)?);
            }
            let mut ids = vec![0i64; batch as usize];
            state
                .ids
                .f_to(Device::Cpu)
                .map_err(err)?
                .f_copy_data(&mut ids, batch as usize)
                .map_err(err)?;
            for (seq, id) in greedy_tokens.iter_mut().zip(ids) {
                seq.push(id);
            }
        }
    }
    Ok(Logits {
        vocab: spec.vocab,
        prefill,
        steps,
        greedy_tokens,
    })
}
