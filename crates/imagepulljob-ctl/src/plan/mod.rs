//! The pure part: ImagePullJob ([`job`]), ImageListPullJob ([`list`]) and NodeImage
//! lifecycle and pruning ([`nodeimage`]), pull secrets' copies ([`secrets`]).

pub mod job;
pub mod list;
pub mod nodeimage;
pub mod secrets;

#[cfg(test)]
mod tests;
