//! Support for Relent's examples: a local payment provider that misbehaves on a script.

pub mod provider;
