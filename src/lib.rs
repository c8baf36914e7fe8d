//! janus
