//! The kinds of failure `lab` reports, and the exit code of each (2: bad input or a missing
//! prerequisite; 1: the work failed).

/// A failure that ends a `lab` command.
///
/// Each variant carries one line for the user: what is wrong and how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad input or a missing prerequisite (bad flag value, unknown GPU, existing output file,
    /// no libtorch, no GPU). Exit code 2; nothing was written.
    #[error("{0}")]
    Usage(String),
    /// The input was fine but the work failed (unreadable file, out of memory during a run).
    /// Exit code 1; nothing was written.
    #[error("{0}")]
    Runtime(String),
    /// The GPU ran out of memory during a measurement: a runtime failure (exit code 1) that
    /// the worker reports as its own kind (`out_of_memory`), so that `lab sweep` can take it
    /// as a result (the limit) rather than a failure, without reading any message text.
    #[error("{0}")]
    OutOfMemory(String),
}

impl Error {
    /// Builds a [`Error::Usage`] from anything printable.
    pub fn usage(message: impl Into<String>) -> Self {
        Error::Usage(message.into())
    }

    /// Builds a [`Error::Runtime`] from anything printable.
    pub fn runtime(message: impl Into<String>) -> Self {
        Error::Runtime(message.into())
    }

    /// Builds a [`Error::OutOfMemory`] from anything printable.
    pub fn out_of_memory(message: impl Into<String>) -> Self {
        Error::OutOfMemory(message.into())
    }

    /// The process exit code for this failure: 2 for [`Error::Usage`], 1 for
    /// [`Error::Runtime`] and [`Error::OutOfMemory`].
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Usage(_) => 2,
            Error::Runtime(_) | Error::OutOfMemory(_) => 1,
        }
    }
}

/// Result type of the `lab` library.
pub type Result<T, E = Error> = std::result::Result<T, E>;
