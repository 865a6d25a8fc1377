//! TODO: report
