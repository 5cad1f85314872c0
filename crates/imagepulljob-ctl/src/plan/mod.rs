//! The pure part: ImagePullJob ([`job`]), ImageListPullJob ([`list`]) and NodeImage
//! lifecycle and pruning ([`nodeimage`]).

pub mod job;
pub mod list;
pub mod nodeimage;

#[cfg(test)]
mod tests;
