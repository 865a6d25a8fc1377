//! TODO: measure
