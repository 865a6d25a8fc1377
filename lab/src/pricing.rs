//! TODO: pricing
