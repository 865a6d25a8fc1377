//! TODO: catalog
