//! TODO: environment
