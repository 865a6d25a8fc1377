//! TODO: estimate
