//! Well-known label, annotation, finalizer, condition, env and event strings, exactly as
//! upstream OpenKruise spells them. One module, split by feature area; everything is
//! re-exported flat, so `keys::LIFECYCLE_STATE` and `keys::SIDECARSET_HASH` both work.

mod jobs;
mod node;
mod safety;
mod sidecarset;
mod spread;
mod workload;

pub use jobs::*;
pub use node::*;
pub use safety::*;
pub use sidecarset::*;
pub use spread::*;
pub use workload::*;
