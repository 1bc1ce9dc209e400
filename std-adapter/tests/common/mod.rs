//! What more than one of relent-tokio's test binaries needs: an error with a cause, and the chain
//! of messages an error reporter prints.

use relent_tokio::HZ;
use relent_tokio::core::{Classify, Verdict};

/// Each message of an error's chain, as anyhow's `{:#}` prints them.
pub(crate) fn chain(e: &dyn std::error::Error) -> Vec<String> {
    std::iter::successors(Some(e), |e| e.source()).map(ToString::to_string).collect()
}

/// A client library's error with a cause (an I/O error), not retryable by its own account.
#[derive(Debug)]
pub(crate) struct Unavailable(pub(crate) std::io::Error);

impl std::fmt::Display for Unavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("upstream unavailable")
    }
}

impl std::error::Error for Unavailable {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl Classify<HZ> for Unavailable {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::NotRetryable
    }
}
