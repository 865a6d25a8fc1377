//! TODO: kit
