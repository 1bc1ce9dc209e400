//! Support for Relent's examples: a local payment provider (HTTP) and a pricing service (gRPC)
//! that misbehave on a script, and how the examples print their figures.

#[cfg(feature = "grpc")]
pub mod pricing;
pub mod provider;
pub mod report;
