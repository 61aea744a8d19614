//! stub
#![deny(missing_docs)]
pub mod backend;
pub mod codec;
pub mod commands;
mod error;
pub mod gc;
pub use error::{Error, Result};
