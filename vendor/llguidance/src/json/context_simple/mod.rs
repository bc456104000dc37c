mod context;
mod draft;

pub use context::{Context, PreContext};
pub use draft::{Draft, ResourceRef};
