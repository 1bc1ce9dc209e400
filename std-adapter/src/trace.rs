//! Logging: every core event as a `tracing` event, with the dependency's name and the operation's
//! id as fields (the std half of embassy's `fmt.rs` shim; the embassy adapter logs with defmt).
//!
//! Levels: decisions a dashboard should count (a retry scheduled, a refusal, a circuit change, an
//! operation that did not succeed) at INFO or WARN; the per-attempt detail at DEBUG.

use relent_core::{AfterFailure, DelaySource, Disposition, Event, Observer};

use crate::clock::HZ;

/// An observer that emits `tracing` events for one dependency.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Trace<'a> {
    pub(crate) dependency: &'a str,
}

impl Observer<HZ> for Trace<'_> {
    fn on_event(&mut self, event: &Event<HZ>) {
        let dependency = self.dependency;
        let operation = event.operation().0;
        match *event {
            Event::AttemptDispatched { attempt, timeout, .. } => tracing::debug!(
                dependency,
                operation,
                attempt,
                timeout_us = timeout.as_ticks(),
                "relent: attempt dispatched"
            ),
            Event::AttemptSucceeded { attempt, .. } => {
                tracing::debug!(dependency, operation, attempt, "relent: attempt succeeded")
            }
            Event::AttemptFailed { attempt, then, .. } => {
                let then = match then {
                    AfterFailure::Retry => "retry",
                    AfterFailure::NotRetryable => "not_retryable",
                    AfterFailure::Stop(problem) => problem.as_str(),
                };
                tracing::debug!(dependency, operation, attempt, then, "relent: attempt failed")
            }
            Event::RetryScheduled { attempt, delay, source, .. } => {
                let (source, stated_us) = match source {
                    DelaySource::Backoff { nominal } => ("backoff", nominal.as_ticks()),
                    DelaySource::RetryAfter { stated } => ("retry_after", stated.as_ticks()),
                };
                tracing::info!(
                    dependency,
                    operation,
                    attempt,
                    delay_us = delay.as_ticks(),
                    source,
                    stated_us,
                    "relent: retry scheduled"
                )
            }
            Event::Refused { attempt, problem, .. } => {
                tracing::warn!(
                    dependency,
                    operation,
                    attempt,
                    code = problem.as_str(),
                    "relent: attempt refused"
                )
            }
            Event::WaitingForRateLimit { attempt, until, .. } => {
                tracing::debug!(
                    dependency,
                    operation,
                    attempt,
                    until_us = until.as_ticks(),
                    "relent: waiting for a rate-limit unit"
                )
            }
            Event::WaitingForAirtime { attempt, until, .. } => {
                tracing::debug!(
                    dependency,
                    operation,
                    attempt,
                    until_us = until.as_ticks(),
                    "relent: waiting for airtime (duty cycle)"
                )
            }
            Event::CircuitChanged { state, .. } => {
                tracing::warn!(dependency, operation, state = state.as_str(), "relent: circuit changed")
            }
            Event::CooldownExtended { until, .. } => {
                tracing::warn!(
                    dependency,
                    operation,
                    until_us = until.as_ticks(),
                    "relent: cooldown extended"
                )
            }
            Event::Completed { disposition, problem, dispatched, .. } => {
                let code = problem.map_or("", |p| p.as_str());
                if disposition == Disposition::Succeeded {
                    tracing::debug!(dependency, operation, dispatched, "relent: operation succeeded")
                } else {
                    tracing::info!(
                        dependency,
                        operation,
                        dispatched,
                        disposition = disposition.as_str(),
                        code,
                        "relent: operation ended"
                    )
                }
            }
            // An event this version does not know yet (the enum is non_exhaustive).
            _ => tracing::debug!(dependency, operation, event = ?event, "relent: event"),
        }
    }
}
