//! The measurement of a sweep's points through the worker, one fresh process per point and one
//! point per GPU in a round.

use super::{point_file_name, Dimension, FittedPoint, MeasurementRunner, PointOutcome};
use crate::device::Device;
use crate::digest::sha256_hex;
use crate::document::{self, Configuration};
use crate::{Error, Result};
use std::path::PathBuf;

/// Runs each point through [`crate::measure::run_measured`] (a fresh worker process per point)
/// and writes its document to `DIR/<dimension>-<value>.json`. With several `devices`, a round
/// measures one point per GPU at the same time (each point's document names its GPU).
///
/// The worker's `out_of_memory` error ([`Error::OutOfMemory`]) ->
/// [`PointOutcome::OutOfMemory`]; a usage error (missing worker, libtorch or GPU) is returned
/// as it is; any other failure as a runtime error naming the point.
#[derive(Debug, Clone)]
pub struct WorkerRunner {
    /// The `lab-torch-worker` executable ([`crate::worker::locate`]).
    pub worker: PathBuf,
    /// The configuration of every point, the varied dimension aside.
    pub base: Configuration,
    /// The varied dimension.
    pub dimension: Dimension,
    /// The (new) sweep folder.
    pub output_dir: PathBuf,
    /// The GPUs to measure on, at least one (`base.device` is replaced by each in turn).
    pub devices: Vec<Device>,
    /// `--graph-replays` of every point.
    pub graph_replays: Option<u64>,
}

impl WorkerRunner {
    /// Measures `value` on GPU `device` and writes its document.
    fn measure_on(&self, value: u64, device: Device) -> Result<PointOutcome> {
        let mut configuration = self.dimension.apply(&self.base, value);
        configuration.device = device;
        let point = format!("{}={value}", self.dimension);
        let measured =
            match crate::measure::run_measured(&configuration, self.graph_replays, &self.worker) {
                Ok(measured) => measured,
                Err(Error::OutOfMemory(message)) => {
                    return Ok(PointOutcome::OutOfMemory { message })
                }
                Err(Error::Runtime(message)) => {
                    return Err(Error::runtime(format!("{point}: {message}")))
                }
                Err(error) => return Err(error),
            };
        let file = self.output_dir.join(point_file_name(self.dimension, value));
        let bytes = document::write_new(&file, &measured.document)?;
        let mut fitted = FittedPoint::new(file, sha256_hex(&bytes), &measured.document);
        fitted.free_memory_bytes_at_start = measured.free_memory_bytes_at_start;
        Ok(PointOutcome::Fitted(fitted))
    }
}

impl MeasurementRunner for WorkerRunner {
    fn measure(&mut self, value: u64) -> Result<PointOutcome> {
        self.measure_on(
            value,
            self.devices.first().copied().unwrap_or(Device::FIRST),
        )
    }

    fn parallelism(&self) -> usize {
        self.devices.len().max(1)
    }

    fn measure_many(&mut self, values: &[u64]) -> Vec<Result<PointOutcome>> {
        if values.len() <= 1 {
            return values.iter().map(|v| self.measure(*v)).collect();
        }
        let this = &*self;
        std::thread::scope(|scope| {
            let handles: Vec<_> = values
                .iter()
                .zip(this.devices.iter().cycle())
                .map(|(&value, &device)| scope.spawn(move || this.measure_on(value, device)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(Error::runtime("a sweep point's thread panicked")))
                })
                .collect()
        })
    }

    fn model_bytes(&self, value: u64) -> Option<u64> {
        let model = self.dimension.apply(&self.base, value).sizes().ok()?;
        model
            .predicted_weight_allocation()
            .checked_add(model.predicted_input_allocation())?
            .checked_add(model.predicted_forward_peak_extra())
    }
}
