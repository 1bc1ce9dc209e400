//! Retry policies, dependency configurations and HTTP status rules (and, with feature `tonic`, gRPC
//! code rules) read from a service's configuration file (feature `serde`).
//!
//! Why: the numbers in a policy (attempts, delays, the attempt timeout) and in a dependency (its
//! budget, its breaker, its bulkhead), and which of a provider's statuses are worth a retry, are
//! what operators tune per provider and per environment, and a rebuild to change one is too slow in
//! an incident. So [`PolicySettings`], [`DependencySettings`] and [`ClassifierSettings`] (and
//! `GrpcClassifierSettings`, with feature `tonic`) read them
//! with serde, in whatever format the service already reads its configuration in (TOML and JSON
//! are tested).
//!
//! A file can hold nothing that code could not: every value goes through the builders a `const`
//! policy goes through, and the same checks. A value that cannot work is refused as the file is
//! read, with the builder's message, which says how to fix it, and (from the format's parser)
//! where in the file it is. A misspelt key is refused too, never ignored: a `break_fro` that
//! silently left the default in place would be found in the next outage. What involves a policy
//! and a dependency together (a token bucket's hold must outlast the policy's attempt timeout) is
//! for [`RetryPolicy::check_budget`] once both are read, as each operation checks it as it starts.
//!
//! Durations are strings with their unit, as [humantime](https://docs.rs/humantime) reads them:
//! `"100ms"`, `"2s"`, `"1m 30s"`. A bare number is refused: `100` could be milliseconds or
//! seconds. They are rounded up to relent-tokio's ticks (microseconds), as every conversion from
//! `std::time::Duration` is. A duration of the service's own beside them (an operation's deadline,
//! the layer's) reads the same strings with humantime's parser, for example through the
//! `humantime-serde` crate, and [`ticks`] makes it a `Duration` of the core's.
//!
//! Each is written back (`Serialize`) with the same keys, the defaults left out, so that a service
//! can show the configuration it runs with (a line at start, an admin endpoint) in the form it
//! reads, and reading that back gives the same configuration.
//!
//! The names are the builders' own: a policy's `attempts`, `backoff`, `base_delay`, `max_delay`,
//! `multiplier`, `jitter`, `attempt_timeout`, `min_remaining` and `retry_after_spread`; a dependency's `window`,
//! `budget`, `breaker`, `bulkhead`, `rate_limit`, `duty_cycle`, `cooldown`, `client_throttle`,
//! `latency_samples` and `critical_reserve`, each protection
//! with its constructor's arguments. The budget's shape is its `kind` and the breaker's rule its
//! `trip`, named as the constructors are. A classifier's keys are its rules' names (`retry`, `fail`,
//! `success`), each a list of statuses.
//!
//! A gRPC client's retry policies may already be written in gRPC's own file, its service config:
//! [`GrpcServiceConfig`] (feature `tonic`) reads that, in gRPC's keys, and gives each method its
//! policy, classifier and timeout.

use serde::de::{self, Deserialize, Deserializer, Visitor};
use serde::ser::{self, Serialize, Serializer};

use relent_core::{
    Backoff, BreakerConfig, BudgetKind, ConfigError, DependencyConfig, DutyCycle, Jitter, MAX_ATTEMPTS,
    RateLimit, RetryBudget, RetryPolicy, Trip,
};

use crate::clock::{Duration, HZ, std_duration, ticks};
use crate::http::{StatusClassifier, StatusRule};
use http::StatusCode;

#[cfg(feature = "tonic")]
mod grpc_service;
#[cfg(feature = "tonic")]
pub use grpc_service::{GrpcMethodConfig, GrpcServiceConfig};

/// A [`RetryPolicy`] read from a configuration file: deserialize this, then use its policy.
///
/// ```
/// use relent_tokio::config::PolicySettings;
/// use relent_tokio::core::{Jitter, RetryPolicy};
/// use relent_tokio::Duration;
///
/// let PolicySettings(checkout) = toml::from_str(r#"
///     attempts = 3
///     backoff = "exponential"
///     base_delay = "100ms"
///     max_delay = "2s"
///     attempt_timeout = "3s"
/// "#)?;
/// // The same policy as in code; jitter is full unless the file says otherwise.
/// let in_code = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
///     .attempt_timeout(Duration::from_secs(3))
///     .build()?;
/// assert_eq!(checkout, in_code);
/// assert_eq!(checkout.jitter_mode(), Jitter::Full);
///
/// // A policy that cannot work is refused as the file is read, saying how to fix it.
/// let backwards = toml::from_str::<PolicySettings>(r#"
///     attempts = 3
///     backoff = "exponential"
///     base_delay = "2s"
///     max_delay = "100ms"
/// "#);
/// assert!(backwards.unwrap_err().to_string().contains(
///     "the maximum delay is shorter than the base delay: raise the maximum delay to at least the base delay"
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The keys:
///
/// | key | needed | what it is |
/// |---|---|---|
/// | `attempts` | always | attempts in all, the first included: 1 to 64 ([`MAX_ATTEMPTS`]) |
/// | `backoff` | above one attempt | `"exponential"` ([`RetryPolicy::exponential`]) or `"constant"` ([`RetryPolicy::constant`]) |
/// | `base_delay` | with a backoff | the first delay; a constant backoff's every delay |
/// | `max_delay` | with an exponential backoff | the cap of the delay and the longest Retry-After slept through (a constant backoff's defaults to its delay) |
/// | `multiplier` | no: 2 by default | an exponential backoff's factor, a number above 1 with at most two decimals (`1.5`; [`RetryPolicyBuilder::multiplier_percent`](relent_core::RetryPolicyBuilder::multiplier_percent)) |
/// | `jitter` | no: `"full"` by default | `"none"`, `"full"`, `"equal"` or `"decorrelated"` ([`Jitter`]) |
/// | `attempt_timeout` | no | each attempt's ceiling |
/// | `min_remaining` | no | the time a retry needs left before the deadline after its delay |
/// | `retry_after_spread` | no | a random amount up to this added to a stated Retry-After |
///
/// With one attempt and no backoff, it is [`RetryPolicy::single_attempt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PolicySettings(pub RetryPolicy<HZ>);

/// A [`DependencyConfig`] read from a configuration file: deserialize this, then give its
/// configuration to [`Dependency::new`](crate::Dependency::new).
///
/// ```
/// use relent_tokio::config::DependencySettings;
/// use relent_tokio::core::{BreakerConfig, DependencyConfig, RetryBudget};
/// use relent_tokio::{Dependency, Duration};
///
/// let DependencySettings(config) = toml::from_str(r#"
///     window = "10s"
///     budget = { kind = "ratio", percent = 10, floor = 5 }
///     breaker = { trip = "consecutive_failures", count = 5, break_for = "30s" }
///     bulkhead = 64
/// "#)?;
/// let in_code = DependencyConfig::new(Duration::from_secs(10))
///     .budget(RetryBudget::ratio(10, 5)?)
///     .breaker(BreakerConfig::consecutive_failures(5, Duration::from_secs(30)))
///     .bulkhead(64);
/// assert_eq!(config, in_code);
/// let payrail = Dependency::new("payrail", config)?;
///
/// // A misspelt key is refused, not ignored.
/// let typo = toml::from_str::<DependencySettings>(r#"
///     window = "10s"
///     breaker = { trip = "consecutive_failures", count = 5, break_fro = "30s" }
/// "#);
/// assert!(typo.unwrap_err().to_string().contains("unknown field `break_fro`"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The keys, each protection optional but the window:
///
/// | key | value |
/// |---|---|
/// | `window` | the time window of the dependency's counts |
/// | `budget` | `{ kind = "ratio", percent, floor }` ([`RetryBudget::ratio`]; `floor` default 0) or `{ kind = "token_bucket", capacity, refill, period, hold }` ([`RetryBudget::token_bucket`]) |
/// | `breaker` | `{ trip = "consecutive_failures", count, break_for }`, `{ trip = "failure_ratio", percent, min_calls, break_for }` or `{ trip = "count_window", size, percent, min_calls, break_for }` ([`BreakerConfig`]'s constructors), each with `probes` (default 1) and `slow_calls` (a threshold) if wanted |
/// | `bulkhead` | the most attempts in flight at once |
/// | `bulkhead_queue` | `{ places, max_wait }`: when the bulkhead is full, how many calls may wait for a slot, and for how long at most ([`DependencyConfig::bulkhead_queue`]; needs `bulkhead`) |
/// | `rate_limit` | `{ count, period, burst, max_wait }` ([`RateLimit`]; `burst` default 1, `max_wait` default none) |
/// | `duty_cycle` | `{ airtime, window }` or `{ per_mille, window }` ([`DutyCycle`]) |
/// | `cooldown` | the longest cooldown a Retry-After starts ([`DependencyConfig::cooldown`]) |
/// | `adaptive_limit` | `{ slow, min_slots, decrease_to_permille }`: lower the bulkhead's slots on signs of overload (transient failures, attempts that take `slow` or longer) and raise them again while attempts come back fast ([`AdaptiveLimit`](relent_core::AdaptiveLimit); `min_slots` default 1, `decrease_to_permille` default 500, a halving; needs `bulkhead`, its ceiling) |
/// | `client_throttle` | `{ k_permille }`: refuse attempts locally so that the dependency is sent about `k_permille / 1000` times what it accepts ([`ClientThrottle`](relent_core::ClientThrottle); 2000 is the SRE book's K = 2) |
/// | `latency_samples` | keep a log of how long attempts take, each weighing half as much every this many attempts (20 to 4000; [`DependencyConfig::latency_samples`]): for a hedge at a percentile of the dependency's latency, and the gauges' percentiles |
/// | `critical_reserve` | the percent of each limit (the bulkhead's slots, the retry budget, the rate limit's burst, the duty cycle's airtime) that sheddable work may not use (1 to 90; [`DependencyConfig::critical_reserve`], [`Criticality`](relent_core::Criticality)) |
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DependencySettings(pub DependencyConfig<HZ>);

/// A [`StatusClassifier`]'s rules per status read from a configuration file: deserialize this,
/// then give its classifier to [`RetryLayer::classifier`](crate::RetryLayer::classifier).
///
/// Which statuses a provider's retryable answers come with is found in operation (a load
/// balancer's 502 while it replaces a node, a 409 that is never worth a second try), so it is
/// tuned with the rest of a dependency's numbers. Each list names the statuses that take its rule
/// instead of the default ([the `http` module](crate::http) lists the defaults); a status in no
/// list keeps its default.
///
/// ```
/// use http::StatusCode;
/// use relent_tokio::config::ClassifierSettings;
/// use relent_tokio::http::{StatusClassifier, StatusRule, never_arrived};
///
/// let ClassifierSettings(payrail) = toml::from_str(r#"
///     retry = [502, 504]
///     fail = [409]
/// "#)?;
/// assert_eq!(payrail.rule_for(StatusCode::BAD_GATEWAY), StatusRule::Retry);
/// assert_eq!(payrail.rule_for(StatusCode::CONFLICT), StatusRule::Fail);
/// assert_eq!(payrail.rule_for(StatusCode::SERVICE_UNAVAILABLE), StatusRule::Retry); // the default
/// // Which transport errors are retried stays in code: chain a rule of the client's own (see
/// // `retry_error_when`) on what the file gave. This one is the default's.
/// let payrail: StatusClassifier = payrail.retry_error_when(never_arrived);
/// # let _ = payrail;
///
/// // A status is given one rule, and a status is a number from 100 to 999.
/// let both = toml::from_str::<ClassifierSettings>("retry = [502]\nfail = [502]");
/// assert!(both.unwrap_err().to_string().contains(
///     "status 502 is in both `retry` and `fail`: give each status one rule"
/// ));
/// let typo = toml::from_str::<ClassifierSettings>("retry = [5033]");
/// assert!(typo.unwrap_err().to_string().contains(
///     "`5033` is not an HTTP status code: write one from 100 to 999, such as 502"
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The keys, each optional:
///
/// | key | value |
/// |---|---|
/// | `retry` | statuses retried, after the response's `Retry-After` when it has one ([`StatusRule::Retry`]) |
/// | `fail` | statuses that count against the dependency and are not retried ([`StatusRule::Fail`]) |
/// | `success` | statuses that go back to the caller as an answer ([`StatusRule::Success`]) |
///
/// Written back (`Serialize`), the lists hold the classifier's [overrides](StatusClassifier::overrides),
/// each in ascending order. The rule for transport errors
/// ([`StatusClassifier::retry_error_when`]) is a function, so it is neither read nor written.
#[derive(Debug, Clone, Default)]
pub struct ClassifierSettings(pub StatusClassifier);

impl<'de> Deserialize<'de> for PolicySettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RawPolicy::deserialize(deserializer)?.build().map(Self).map_err(de::Error::custom)
    }
}

impl<'de> Deserialize<'de> for DependencySettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        RawDependency::deserialize(deserializer)?.build().map(Self).map_err(de::Error::custom)
    }
}

/// Written with the keys it is read with, leaving out what is at its default, so that reading it
/// back gives the same policy.
impl Serialize for PolicySettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RawPolicy::of(&self.0).serialize(serializer)
    }
}

/// Written with the keys it is read with, leaving out what is at its default, so that reading it
/// back gives the same configuration. A duty cycle is written as its airtime.
impl Serialize for DependencySettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RawDependency::of(&self.0).map_err(ser::Error::custom)?.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for ClassifierSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rules = RawRules::<Status>::deserialize(deserializer)?.rules().map_err(de::Error::custom)?;
        Ok(Self(rules.into_iter().fold(StatusClassifier::default(), |c, (Status(s), rule)| c.rule(s, rule))))
    }
}

/// Written with the keys it is read with; empty lists are left out.
impl Serialize for ClassifierSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RawRules::of(self.0.overrides().map(|(status, rule)| (Status(status), rule))).serialize(serializer)
    }
}

/// A [`GrpcClassifier`](crate::grpc::GrpcClassifier)'s rules per code read from a configuration
/// file (features `serde` and `tonic`), as [`ClassifierSettings`] reads an HTTP classifier's: the
/// same keys (`retry`, `fail`, `success`), each a list of codes by the names gRPC's documents give
/// them. A code in no list keeps its default ([the `grpc` module](crate::grpc) lists them).
///
/// ```
/// use relent_tokio::config::GrpcClassifierSettings;
/// use relent_tokio::http::StatusRule;
/// use tonic::Code;
///
/// let GrpcClassifierSettings(ledger) = toml::from_str(r#"
///     retry = ["ABORTED"]        # a lost race that a second try wins
///     fail = ["PERMISSION_DENIED"] # a credential the far side rotated: count it against the ledger
/// "#)?;
/// assert_eq!(ledger.rule_for(Code::Aborted), StatusRule::Retry);
/// assert_eq!(ledger.rule_for(Code::PermissionDenied), StatusRule::Fail);
/// assert_eq!(ledger.rule_for(Code::Unavailable), StatusRule::Retry); // the default
///
/// let typo = toml::from_str::<GrpcClassifierSettings>(r#"retry = ["UNAVAILBLE"]"#);
/// assert!(typo.unwrap_err().to_string().contains(
///     "`UNAVAILBLE` is not the name of a gRPC status code: write one as gRPC's documents do, such as UNAVAILABLE or ABORTED"
/// ));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// Written back (`Serialize`), the lists hold the classifier's
/// [overrides](crate::grpc::GrpcClassifier::overrides), each in the order of the codes' numbers.
#[cfg(feature = "tonic")]
#[derive(Debug, Clone, Default)]
pub struct GrpcClassifierSettings(pub crate::grpc::GrpcClassifier);

#[cfg(feature = "tonic")]
impl<'de> Deserialize<'de> for GrpcClassifierSettings {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let rules = RawRules::<GrpcCode>::deserialize(deserializer)?.rules().map_err(de::Error::custom)?;
        let classifier = crate::grpc::GrpcClassifier::default();
        Ok(Self(rules.into_iter().fold(classifier, |c, (GrpcCode(code), rule)| c.rule(code, rule))))
    }
}

/// Written with the keys it is read with; empty lists are left out.
#[cfg(feature = "tonic")]
impl Serialize for GrpcClassifierSettings {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RawRules::of(self.0.overrides().map(|(code, rule)| (GrpcCode(code), rule))).serialize(serializer)
    }
}

/// Why a file's policy or dependency cannot be built: a builder's refusal, or keys that do not go
/// together, which no builder could be called with.
#[derive(Debug)]
enum Refused {
    Config(ConfigError),
    Keys(&'static str),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Config(e) => write!(f, "{e}"),
            Self::Keys(what) => f.write_str(what),
        }
    }
}

impl From<ConfigError> for Refused {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

/// A duration with its unit, in ticks.
#[derive(Debug, Clone, Copy)]
struct Span(Duration);

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Text;
        impl Visitor<'_> for Text {
            type Value = Span;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a duration with its unit, such as "100ms", "2s" or "1m 30s""#)
            }
            fn visit_str<E: de::Error>(self, text: &str) -> Result<Span, E> {
                humantime::parse_duration(text).map(|d| Span(ticks(d))).map_err(|e| {
                    E::custom(format_args!(
                        r#"`{text}` is not a duration ({e}): write one with its unit, such as "100ms", "2s" or "1m 30s""#
                    ))
                })
            }
        }
        deserializer.deserialize_str(Text)
    }
}

/// As humantime writes it (`"1m 30s"`, `"100ms"`), which it reads back exactly.
impl Serialize for Span {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_duration(std_duration(self.0)))
    }
}

/// The names a policy's `jitter` takes: the core's own.
const JITTERS: [Jitter; 4] = [Jitter::None, Jitter::Full, Jitter::Equal, Jitter::Decorrelated];
const JITTER_NAMES: [&str; 4] =
    [JITTERS[0].as_str(), JITTERS[1].as_str(), JITTERS[2].as_str(), JITTERS[3].as_str()];

/// A jitter mode by its name.
#[derive(Debug, Clone, Copy)]
struct JitterName(Jitter);

impl<'de> Deserialize<'de> for JitterName {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        JITTERS
            .into_iter()
            .find(|j| j.as_str() == name)
            .map(Self)
            .ok_or_else(|| de::Error::unknown_variant(&name, &JITTER_NAMES))
    }
}

impl Serialize for JitterName {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

/// A backoff's multiplier as a file writes it, a number (`1.5`), held in hundredths as
/// [`RetryPolicyBuilder::multiplier_percent`](relent_core::RetryPolicyBuilder::multiplier_percent)
/// takes it.
#[derive(Debug, Clone, Copy)]
struct Multiplier(u16);

impl Multiplier {
    /// `value` in hundredths: a finite number above 1, of at most two decimals, up to 655.35; or
    /// why not, in the file's terms (the builder's own refusal speaks in hundredths).
    pub(crate) fn percent(value: f64) -> Result<u16, String> {
        let hundredths = value * 100.0;
        let whole = hundredths.round();
        if !(value.is_finite() && (0.0..=f64::from(u16::MAX)).contains(&whole)) {
            return Err("give a number between 1 and 655.35, such as 1.5 (2 doubles each delay)".into());
        }
        if value <= 1.0 {
            return Err("it must be more than 1 for the delay to grow (1.5 multiplies each delay by 1.5, 2 \
                        doubles it); for the same delay each time, use a constant backoff"
                .into());
        }
        if (hundredths - whole).abs() > 1e-6 {
            return Err(format!(
                "Relent takes it in hundredths, so give at most two decimals, such as {}",
                whole.max(101.0) / 100.0
            ));
        }
        Ok(whole as u16)
    }
}

impl<'de> Deserialize<'de> for Multiplier {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = f64::deserialize(deserializer)?;
        Self::percent(value)
            .map(Self)
            .map_err(|why| de::Error::custom(format_args!("a backoff multiplier of {value}: {why}")))
    }
}

/// As a number (`1.5`), which reads back as the same hundredths.
impl Serialize for Multiplier {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_f64(f64::from(self.0) / 100.0)
    }
}

#[derive(Debug, Clone, Copy, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum BackoffName {
    Exponential,
    Constant,
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    attempts: u8,
    #[serde(skip_serializing_if = "Option::is_none")]
    backoff: Option<BackoffName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    base_delay: Option<Span>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_delay: Option<Span>,
    #[serde(skip_serializing_if = "Option::is_none")]
    multiplier: Option<Multiplier>,
    #[serde(skip_serializing_if = "Option::is_none")]
    jitter: Option<JitterName>,
    #[serde(skip_serializing_if = "Option::is_none")]
    attempt_timeout: Option<Span>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min_remaining: Option<Span>,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_spread: Option<Span>,
}

impl RawPolicy {
    /// What `policy` is written as: its builder's arguments, with the single-attempt policy's
    /// delays and every default left out.
    fn of(policy: &RetryPolicy<HZ>) -> Self {
        let zero = Duration::from_ticks(0);
        let (backoff, multiplier) = match policy.backoff() {
            Backoff::Constant => (BackoffName::Constant, None),
            Backoff::Multiplied { percent } => (BackoffName::Exponential, Some(Multiplier(percent))),
            // Doubling (`Backoff` is non-exhaustive: relent-core has no other).
            _ => (BackoffName::Exponential, None),
        };
        let single = policy.max_attempts() == 1
            && matches!(backoff, BackoffName::Constant)
            && policy.base_delay() == zero
            && policy.max_delay() == zero;
        let unless = |d: Duration, default: Duration| (d != default).then_some(Span(d));
        Self {
            attempts: policy.max_attempts(),
            backoff: (!single).then_some(backoff),
            base_delay: (!single).then_some(Span(policy.base_delay())),
            max_delay: (!single).then_some(Span(policy.max_delay())),
            multiplier,
            jitter: (policy.jitter_mode() != Jitter::default()).then_some(JitterName(policy.jitter_mode())),
            attempt_timeout: policy.attempt_timeout().map(Span),
            // `build` makes a zero one tick: one tick is the default.
            min_remaining: unless(policy.min_remaining(), Duration::from_ticks(1)),
            retry_after_spread: unless(policy.retry_after_spread(), zero),
        }
    }

    fn build(self) -> Result<RetryPolicy<HZ>, Refused> {
        let attempts = self.attempts;
        let mut builder = match (self.backoff, self.base_delay, self.max_delay) {
            (Some(BackoffName::Exponential), Some(base), Some(max)) => {
                RetryPolicy::exponential(attempts, base.0, max.0)
            }
            (Some(BackoffName::Exponential), ..) => {
                return Err(Refused::Keys(
                    "an exponential backoff needs `base_delay` and `max_delay`: the first delay, and the most any delay grows to",
                ));
            }
            (Some(BackoffName::Constant), Some(delay), max) => {
                let builder = RetryPolicy::constant(attempts, delay.0);
                match max {
                    Some(max) => builder.max_delay(max.0),
                    None => builder,
                }
            }
            (Some(BackoffName::Constant), None, _) => {
                return Err(Refused::Keys(
                    "a constant backoff needs `base_delay`: the delay before each retry",
                ));
            }
            (None, None, None) if attempts == 1 => RetryPolicy::single_attempt(),
            // The count's own error first: no backoff would make 0 or 65 attempts work.
            (None, None, None) if attempts == 0 || attempts > MAX_ATTEMPTS => {
                return Err(Refused::Config(ConfigError::MaxAttemptsOutOfRange));
            }
            (None, None, None) => {
                return Err(Refused::Keys(
                    r#"a policy of more than one attempt needs a `backoff`: "exponential" or "constant", with its delays"#,
                ));
            }
            (None, ..) => {
                return Err(Refused::Keys(
                    r#"`base_delay` and `max_delay` need a `backoff` to apply to: "exponential" or "constant""#,
                ));
            }
        };
        // On a constant backoff, or a single attempt, the builder refuses it, saying why.
        if let Some(Multiplier(percent)) = self.multiplier {
            builder = builder.multiplier_percent(percent);
        }
        if let Some(JitterName(jitter)) = self.jitter {
            builder = builder.jitter(jitter);
        }
        if let Some(timeout) = self.attempt_timeout {
            builder = builder.attempt_timeout(timeout.0);
        }
        if let Some(left) = self.min_remaining {
            builder = builder.min_remaining(left.0);
        }
        if let Some(spread) = self.retry_after_spread {
            builder = builder.retry_after_spread(spread.0);
        }
        Ok(builder.build()?)
    }
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawDependency {
    window: Span,
    #[serde(skip_serializing_if = "Option::is_none")]
    budget: Option<Checked<RawBudget>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    breaker: Option<Checked<RawBreaker>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bulkhead: Option<Checked<Slots>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    bulkhead_queue: Option<Checked<RawQueue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    adaptive_limit: Option<Checked<RawAdaptive>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rate_limit: Option<Checked<RawRateLimit>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    duty_cycle: Option<Checked<RawDutyCycle>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cooldown: Option<Span>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_throttle: Option<Checked<RawThrottle>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    latency_samples: Option<Checked<Samples>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    critical_reserve: Option<Checked<Reserve>>,
}

/// One protection of a dependency, as its key holds it.
trait Part {
    /// `config` with this protection added: the builder calls its keys stand for.
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused>;

    /// What this protection is checked in, as it is read: a dependency with a valid window and
    /// nothing else, unless it needs another protection to mean anything.
    fn alone() -> DependencyConfig<HZ>
    where
        Self: Sized,
    {
        DependencyConfig::new(Duration::from_secs(1))
    }
}

/// A protection checked as it is read, so that the format's parser says where it is when it is
/// refused (the line and column of its own table), not only which dependency holds it.
#[derive(Debug, serde::Serialize)]
#[serde(transparent)]
struct Checked<P>(P);

impl<'de, P: Part + Deserialize<'de>> Deserialize<'de> for Checked<P> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let part = P::deserialize(deserializer)?;
        // Alone in a dependency whose window is valid, a refusal can only be this part's.
        let alone = part.add_to(P::alone()).map_err(de::Error::custom)?;
        alone.validate().map_err(de::Error::custom)?;
        Ok(Self(part))
    }
}

/// A bulkhead's slots.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
struct Slots(u16);

impl Part for Slots {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.bulkhead(self.0))
    }
}

/// A latency log's samples.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
struct Samples(u16);

impl Part for Samples {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.latency_samples(self.0))
    }
}

/// A critical reserve, in percent.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(transparent)]
struct Reserve(u8);

impl Part for Reserve {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.critical_reserve(self.0))
    }
}

/// A client throttle's multiplier.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawThrottle {
    k_permille: u16,
}

impl Part for RawThrottle {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.client_throttle(relent_core::ClientThrottle::new(self.k_permille)))
    }
}

/// A bulkhead's adaptive limit.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawAdaptive {
    slow: Span,
    #[serde(default = "RawAdaptive::one", skip_serializing_if = "RawAdaptive::is_one")]
    min_slots: u16,
    #[serde(default = "RawAdaptive::half", skip_serializing_if = "RawAdaptive::is_half")]
    decrease_to_permille: u16,
}

impl RawAdaptive {
    /// The defaults of `AdaptiveLimit::new`, which a file need not write.
    fn defaults() -> relent_core::AdaptiveLimit<HZ> {
        relent_core::AdaptiveLimit::new(Duration::from_secs(1))
    }
    fn one() -> u16 {
        Self::defaults().floor()
    }
    fn is_one(n: &u16) -> bool {
        *n == Self::one()
    }
    fn half() -> u16 {
        Self::defaults().kept_permille()
    }
    fn is_half(n: &u16) -> bool {
        *n == Self::half()
    }
}

impl Part for RawAdaptive {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        let limit = relent_core::AdaptiveLimit::new(self.slow.0)
            .min_slots(self.min_slots)
            .decrease_to_permille(self.decrease_to_permille);
        Ok(config.adaptive_limit(limit))
    }

    /// Checked beside the largest bulkhead, which a limit needs and is bounded by: a file that has
    /// none, or a smaller one than the floor, is refused when the whole dependency is checked.
    fn alone() -> DependencyConfig<HZ> {
        DependencyConfig::new(Duration::from_secs(1)).bulkhead(u16::MAX)
    }
}

/// A bulkhead's queue.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawQueue {
    places: u16,
    max_wait: Span,
}

impl Part for RawQueue {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.bulkhead_queue(self.places, self.max_wait.0))
    }

    /// Checked beside a bulkhead, which a queue needs: a file that has none is refused when the
    /// whole dependency is checked, with the message that says so.
    fn alone() -> DependencyConfig<HZ> {
        DependencyConfig::new(Duration::from_secs(1)).bulkhead(1)
    }
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
enum RawBudget {
    Ratio {
        percent: u8,
        #[serde(default)]
        floor: u32,
    },
    TokenBucket {
        capacity: u32,
        refill: u32,
        period: Span,
        hold: Span,
    },
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(tag = "trip", rename_all = "snake_case", deny_unknown_fields)]
enum RawBreaker {
    ConsecutiveFailures {
        count: u32,
        break_for: Span,
        #[serde(skip_serializing_if = "Option::is_none")]
        probes: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        slow_calls: Option<Span>,
    },
    FailureRatio {
        percent: u8,
        min_calls: u32,
        break_for: Span,
        #[serde(skip_serializing_if = "Option::is_none")]
        probes: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        slow_calls: Option<Span>,
    },
    CountWindow {
        size: u8,
        percent: u8,
        min_calls: u8,
        break_for: Span,
        #[serde(skip_serializing_if = "Option::is_none")]
        probes: Option<u8>,
        #[serde(skip_serializing_if = "Option::is_none")]
        slow_calls: Option<Span>,
    },
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    count: u32,
    period: Span,
    #[serde(skip_serializing_if = "Option::is_none")]
    burst: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_wait: Option<Span>,
}

#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawDutyCycle {
    window: Span,
    #[serde(skip_serializing_if = "Option::is_none")]
    airtime: Option<Span>,
    #[serde(skip_serializing_if = "Option::is_none")]
    per_mille: Option<u16>,
}

impl RawDependency {
    /// What `config` is written as: each protection's constructor arguments, defaults left out.
    fn of(config: &DependencyConfig<HZ>) -> Result<Self, &'static str> {
        let breaker = match config.circuit_breaker() {
            None => None,
            Some(b) => {
                let (break_for, slow_calls) = (Span(b.break_for()), b.slow_call_threshold().map(Span));
                let probes = (b.probe_count() != 1).then_some(b.probe_count());
                Some(match b.trip() {
                    Trip::ConsecutiveFailures { count } => {
                        RawBreaker::ConsecutiveFailures { count, break_for, probes, slow_calls }
                    }
                    Trip::FailureRatio { percent, min_calls } => {
                        RawBreaker::FailureRatio { percent, min_calls, break_for, probes, slow_calls }
                    }
                    Trip::CountWindow { size, percent, min_calls } => {
                        RawBreaker::CountWindow { size, percent, min_calls, break_for, probes, slow_calls }
                    }
                    // Every trip rule relent-core has today is above; one it adds has no key yet.
                    _ => {
                        return Err("this breaker's trip rule has no configuration key in this relent-tokio");
                    }
                })
            }
        };
        let zero = Duration::from_ticks(0);
        Ok(Self {
            window: Span(config.window()),
            budget: config.retry_budget().map(|b| {
                Checked(match b.kind() {
                    BudgetKind::Ratio { percent, floor } => RawBudget::Ratio { percent, floor },
                    BudgetKind::TokenBucket { capacity, refill, period, hold } => {
                        RawBudget::TokenBucket { capacity, refill, period: Span(period), hold: Span(hold) }
                    }
                })
            }),
            breaker: breaker.map(Checked),
            bulkhead: config.bulkhead_slots().map(|slots| Checked(Slots(slots))),
            bulkhead_queue: config
                .bulkhead_queue_places()
                .zip(config.bulkhead_max_wait())
                .map(|(places, max_wait)| Checked(RawQueue { places, max_wait: Span(max_wait) })),
            adaptive_limit: config.adaptive().map(|a| {
                Checked(RawAdaptive {
                    slow: Span(a.slow()),
                    min_slots: a.floor(),
                    decrease_to_permille: a.kept_permille(),
                })
            }),
            rate_limit: config
                .rate()
                .map(|r| RawRateLimit {
                    count: r.count(),
                    period: Span(r.period()),
                    burst: (r.burst_size() != 1).then_some(r.burst_size()),
                    max_wait: (r.max_wait_time() != zero).then_some(Span(r.max_wait_time())),
                })
                .map(Checked),
            duty_cycle: config
                .duty()
                .map(|d| RawDutyCycle {
                    window: Span(d.window()),
                    airtime: Some(Span(d.airtime())),
                    per_mille: None,
                })
                .map(Checked),
            cooldown: config.cooldown_max().map(Span),
            client_throttle: config.throttle().map(|t| Checked(RawThrottle { k_permille: t.k_permille() })),
            latency_samples: config.latency_log_samples().map(|n| Checked(Samples(n))),
            critical_reserve: config.critical_reserve_percent().map(|r| Checked(Reserve(r))),
        })
    }

    fn build(self) -> Result<DependencyConfig<HZ>, Refused> {
        let mut config = DependencyConfig::new(self.window.0);
        let parts: [Option<&dyn Part>; 10] = [
            self.budget.as_ref().map(|p| &p.0 as &dyn Part),
            self.breaker.as_ref().map(|p| &p.0 as &dyn Part),
            self.bulkhead.as_ref().map(|p| &p.0 as &dyn Part),
            self.bulkhead_queue.as_ref().map(|p| &p.0 as &dyn Part),
            self.adaptive_limit.as_ref().map(|p| &p.0 as &dyn Part),
            self.rate_limit.as_ref().map(|p| &p.0 as &dyn Part),
            self.duty_cycle.as_ref().map(|p| &p.0 as &dyn Part),
            self.client_throttle.as_ref().map(|p| &p.0 as &dyn Part),
            self.latency_samples.as_ref().map(|p| &p.0 as &dyn Part),
            self.critical_reserve.as_ref().map(|p| &p.0 as &dyn Part),
        ];
        for part in parts.into_iter().flatten() {
            config = part.add_to(config)?;
        }
        if let Some(max) = self.cooldown {
            config = config.cooldown(max.0);
        }
        config.validate()?;
        Ok(config)
    }
}

impl Part for RawBudget {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.budget(match *self {
            Self::Ratio { percent, floor } => RetryBudget::ratio(percent, floor)?,
            Self::TokenBucket { capacity, refill, period, hold } => {
                RetryBudget::token_bucket(capacity, refill, period.0, hold.0)?
            }
        }))
    }
}

impl Part for RawBreaker {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        let (trip, probes, slow_calls) = match *self {
            Self::ConsecutiveFailures { count, break_for, probes, slow_calls } => {
                (BreakerConfig::consecutive_failures(count, break_for.0), probes, slow_calls)
            }
            Self::FailureRatio { percent, min_calls, break_for, probes, slow_calls } => {
                (BreakerConfig::failure_ratio(percent, min_calls, break_for.0), probes, slow_calls)
            }
            Self::CountWindow { size, percent, min_calls, break_for, probes, slow_calls } => {
                (BreakerConfig::count_window(size, percent, min_calls, break_for.0), probes, slow_calls)
            }
        };
        let mut breaker = trip;
        if let Some(probes) = probes {
            breaker = breaker.probes(probes);
        }
        if let Some(threshold) = slow_calls {
            breaker = breaker.slow_calls(threshold.0);
        }
        Ok(config.breaker(breaker))
    }
}

impl Part for RawRateLimit {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        let mut limit = RateLimit::new(self.count, self.period.0);
        if let Some(burst) = self.burst {
            limit = limit.burst(burst);
        }
        if let Some(wait) = self.max_wait {
            limit = limit.max_wait(wait.0);
        }
        Ok(config.rate_limit(limit))
    }
}

impl Part for RawDutyCycle {
    fn add_to(&self, config: DependencyConfig<HZ>) -> Result<DependencyConfig<HZ>, Refused> {
        Ok(config.duty_cycle(match (self.airtime, self.per_mille) {
            (Some(airtime), None) => DutyCycle::new(airtime.0, self.window.0),
            (None, Some(per_mille)) => DutyCycle::per_mille(per_mille, self.window.0),
            _ => {
                return Err(Refused::Keys(
                    "a duty cycle needs one of `airtime` (the airtime allowed in its window) and `per_mille` (the share of it)",
                ));
            }
        }))
    }
}

/// An HTTP status code, checked as it is read so that the format's parser says where a wrong one is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Status(StatusCode);

impl<'de> Deserialize<'de> for Status {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // Read wider than a status, so that every number out of range gets the same message.
        let number = i64::deserialize(deserializer)?;
        u16::try_from(number).ok().and_then(|n| StatusCode::from_u16(n).ok()).map(Self).ok_or_else(|| {
            de::Error::custom(format_args!(
                "`{number}` is not an HTTP status code: write one from 100 to 999, such as 502"
            ))
        })
    }
}

impl Serialize for Status {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u16(self.0.as_u16())
    }
}

/// What a classifier's rules are keyed by in a file: an HTTP status, or a gRPC code.
trait RuleKey: Copy + Ord {
    /// What a key is, for a refusal: "status", "code".
    const NOUN: &'static str;
    /// The key as a refusal names it: `502`, `ABORTED`.
    fn describe(&self) -> String;
}

impl RuleKey for Status {
    const NOUN: &'static str = "status";
    fn describe(&self) -> String {
        self.0.as_u16().to_string()
    }
}

#[cfg(feature = "tonic")]
/// Each code by the name gRPC's documents give it (`statuscodes.md`), in the order of their
/// numbers: what a configuration file names a code by.
const GRPC_NAMES: [(tonic::Code, &str); 17] = [
    (tonic::Code::Ok, "OK"),
    (tonic::Code::Cancelled, "CANCELLED"),
    (tonic::Code::Unknown, "UNKNOWN"),
    (tonic::Code::InvalidArgument, "INVALID_ARGUMENT"),
    (tonic::Code::DeadlineExceeded, "DEADLINE_EXCEEDED"),
    (tonic::Code::NotFound, "NOT_FOUND"),
    (tonic::Code::AlreadyExists, "ALREADY_EXISTS"),
    (tonic::Code::PermissionDenied, "PERMISSION_DENIED"),
    (tonic::Code::ResourceExhausted, "RESOURCE_EXHAUSTED"),
    (tonic::Code::FailedPrecondition, "FAILED_PRECONDITION"),
    (tonic::Code::Aborted, "ABORTED"),
    (tonic::Code::OutOfRange, "OUT_OF_RANGE"),
    (tonic::Code::Unimplemented, "UNIMPLEMENTED"),
    (tonic::Code::Internal, "INTERNAL"),
    (tonic::Code::Unavailable, "UNAVAILABLE"),
    (tonic::Code::DataLoss, "DATA_LOSS"),
    (tonic::Code::Unauthenticated, "UNAUTHENTICATED"),
];

/// The code gRPC's documents name `name` (`UNAVAILABLE`), if any.
#[cfg(feature = "tonic")]
fn grpc_code_named(name: &str) -> Option<tonic::Code> {
    GRPC_NAMES.iter().find(|(_, n)| *n == name).map(|&(code, _)| code)
}

/// A gRPC code, by its name (`UNAVAILABLE`), checked as it is read so that the format's parser
/// says where a wrong one is.
#[cfg(feature = "tonic")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct GrpcCode(tonic::Code);

#[cfg(feature = "tonic")]
impl Ord for GrpcCode {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        i32::from(self.0).cmp(&i32::from(other.0))
    }
}

#[cfg(feature = "tonic")]
impl PartialOrd for GrpcCode {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(feature = "tonic")]
impl RuleKey for GrpcCode {
    const NOUN: &'static str = "code";
    fn describe(&self) -> String {
        self.name().to_string()
    }
}

#[cfg(feature = "tonic")]
impl GrpcCode {
    fn name(self) -> &'static str {
        // Every code is named there (a unit test checks it): the fallback is never taken.
        GRPC_NAMES.iter().find(|(code, _)| *code == self.0).map_or("UNKNOWN", |(_, name)| name)
    }
}

#[cfg(feature = "tonic")]
impl<'de> Deserialize<'de> for GrpcCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = String::deserialize(deserializer)?;
        grpc_code_named(&name).map(Self).ok_or_else(|| {
            de::Error::custom(format_args!(
                "`{name}` is not the name of a gRPC status code: write one as gRPC's documents do, such as \
                 UNAVAILABLE or ABORTED"
            ))
        })
    }
}

#[cfg(feature = "tonic")]
impl Serialize for GrpcCode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.name())
    }
}

/// A classifier's overrides as a file holds them: a list of keys for each rule.
#[derive(Debug, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
struct RawRules<K> {
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    retry: Vec<K>,
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    fail: Vec<K>,
    #[serde(default = "Vec::new", skip_serializing_if = "Vec::is_empty")]
    success: Vec<K>,
}

impl<K: RuleKey> RawRules<K> {
    /// What a classifier with `overrides` is written as: its keys by rule, each list in ascending
    /// order.
    fn of(overrides: impl Iterator<Item = (K, StatusRule)>) -> Self {
        let mut raw = Self { retry: Vec::new(), fail: Vec::new(), success: Vec::new() };
        for (key, rule) in overrides {
            match rule {
                StatusRule::Retry => &mut raw.retry,
                StatusRule::Fail => &mut raw.fail,
                StatusRule::Success => &mut raw.success,
            }
            .push(key);
        }
        for list in [&mut raw.retry, &mut raw.fail, &mut raw.success] {
            list.sort_unstable();
        }
        raw
    }

    /// Each key with its rule, in the file's order; a key in two lists is refused.
    fn rules(self) -> Result<Vec<(K, StatusRule)>, String> {
        let lists = [
            (StatusRule::Retry, "retry", self.retry),
            (StatusRule::Fail, "fail", self.fail),
            (StatusRule::Success, "success", self.success),
        ];
        let mut rules: Vec<(K, StatusRule)> = Vec::new();
        let mut seen: Vec<(K, &str)> = Vec::new();
        for (rule, list_name, list) in lists {
            for key in list {
                if let Some((_, first)) = seen.iter().find(|(k, name)| *k == key && *name != list_name) {
                    return Err(format!(
                        "{} {} is in both `{first}` and `{list_name}`: give each {} one rule",
                        K::NOUN,
                        key.describe(),
                        K::NOUN
                    ));
                }
                seen.push((key, list_name));
                rules.push((key, rule));
            }
        }
        Ok(rules)
    }
}

#[cfg(test)]
mod tests {
    //! Each key against the builder call it stands for, and each refusal's whole message as a
    //! service's log would show it (toml's, with the line and the key).

    use super::*;
    use proptest::prelude::*;

    fn policy(text: &str) -> Result<RetryPolicy<HZ>, String> {
        toml::from_str::<PolicySettings>(text).map(|p| p.0).map_err(|e| e.to_string())
    }

    fn dependency(text: &str) -> Result<DependencyConfig<HZ>, String> {
        toml::from_str::<DependencySettings>(text).map(|d| d.0).map_err(|e| e.to_string())
    }

    const MS: fn(u64) -> Duration = Duration::from_millis;
    const SECS: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn every_policy_key_stands_for_its_builder_call() {
        let file = r#"
            attempts = 5
            backoff = "exponential"
            base_delay = "50ms"
            max_delay = "1m 30s"
            jitter = "decorrelated"
            attempt_timeout = "2s"
            min_remaining = "250ms"
            retry_after_spread = "3s"
        "#;
        let in_code = RetryPolicy::exponential(5, MS(50), SECS(90))
            .jitter(Jitter::Decorrelated)
            .attempt_timeout(SECS(2))
            .min_remaining(MS(250))
            .retry_after_spread(SECS(3))
            .build();
        assert_eq!(policy(file), Ok(in_code.unwrap()));
    }

    #[test]
    fn a_constant_backoffs_maximum_delay_defaults_to_its_delay() {
        let constant = "attempts = 4\nbackoff = \"constant\"\nbase_delay = \"200ms\"";
        assert_eq!(policy(constant), Ok(RetryPolicy::constant(4, MS(200)).build().unwrap()));
        let longer = format!("{constant}\nmax_delay = \"5s\"");
        assert_eq!(
            policy(&longer),
            Ok(RetryPolicy::constant(4, MS(200)).max_delay(SECS(5)).build().unwrap())
        );
    }

    #[test]
    fn one_attempt_and_no_backoff_is_the_single_attempt_policy() {
        let once = "attempts = 1\nattempt_timeout = \"800ms\"";
        let in_code = RetryPolicy::single_attempt().attempt_timeout(MS(800)).build().unwrap();
        assert_eq!(policy(once), Ok(in_code));
    }

    #[test]
    fn a_multiplier_is_read_in_hundredths_and_written_back_as_the_number_it_was() {
        let exponential =
            "attempts = 6\nbackoff = \"exponential\"\nbase_delay = \"100ms\"\nmax_delay = \"10s\"";
        for (written, percent) in
            [("1.5", 150), ("1.6", 160), ("1.05", 105), ("3", 300), ("655.35", u16::MAX)]
        {
            let file = format!("{exponential}\nmultiplier = {written}");
            let in_code = RetryPolicy::exponential(6, MS(100), SECS(10)).multiplier_percent(percent).build();
            assert_eq!(policy(&file), Ok(in_code.unwrap()), "{written}");
            let back = toml::to_string(&PolicySettings(policy(&file).unwrap())).unwrap();
            assert!(back.contains(&format!("\nmultiplier = {written}")), "{back}");
        }
        // 2 is doubling, the default, and is written as no multiplier at all.
        let doubling = policy(&format!("{exponential}\nmultiplier = 2")).unwrap();
        assert_eq!(doubling, RetryPolicy::exponential(6, MS(100), SECS(10)).build().unwrap());
        assert!(!toml::to_string(&PolicySettings(doubling)).unwrap().contains("multiplier"));
        assert_eq!(doubling.nominal_delay(3), MS(400));
        let steeper = policy(&format!("{exponential}\nmultiplier = 1.5")).unwrap();
        // Each product rounded up to a tick, a microsecond here: 337.5 ms is exact.
        let nominal = [2, 3, 4].map(|retry| steeper.nominal_delay(retry));
        assert_eq!(nominal, [MS(150), MS(225), Duration::from_micros(337_500)]);
    }

    #[test]
    fn a_multiplier_that_cannot_grow_the_delay_or_is_finer_than_a_hundredth_is_refused_saying_why() {
        let exponential =
            "attempts = 6\nbackoff = \"exponential\"\nbase_delay = \"100ms\"\nmax_delay = \"10s\"";
        let on_constant = "attempts = 3\nbackoff = \"constant\"\nbase_delay = \"1s\"\nmultiplier = 1.5";
        assert_eq!(policy(on_constant), Err(format!("{}\n", ConfigError::MultiplierOnConstant.message())));
        // What no multiplier above 1 in hundredths can hold: refused where it is, with what to write.
        for (multiplier, message) in [
            (
                "1.555",
                "a backoff multiplier of 1.555: Relent takes it in hundredths, so give at most two decimals, such as 1.56",
            ),
            (
                "700",
                "a backoff multiplier of 700: give a number between 1 and 655.35, such as 1.5 (2 doubles each delay)",
            ),
            (
                "-2",
                "a backoff multiplier of -2: give a number between 1 and 655.35, such as 1.5 (2 doubles each delay)",
            ),
            (
                "nan",
                "a backoff multiplier of NaN: give a number between 1 and 655.35, such as 1.5 (2 doubles each delay)",
            ),
            (
                "1",
                "a backoff multiplier of 1: it must be more than 1 for the delay to grow (1.5 multiplies each delay \
                 by 1.5, 2 doubles it); for the same delay each time, use a constant backoff",
            ),
            (
                "0.5",
                "a backoff multiplier of 0.5: it must be more than 1 for the delay to grow (1.5 multiplies each \
                 delay by 1.5, 2 doubles it); for the same delay each time, use a constant backoff",
            ),
            (
                "1.001",
                "a backoff multiplier of 1.001: Relent takes it in hundredths, so give at most two decimals, such \
                 as 1.01",
            ),
        ] {
            let file = format!("{exponential}\nmultiplier = {multiplier}");
            let refused = policy(&file).unwrap_err();
            assert!(refused.starts_with("TOML parse error at line 5, column 14"), "{refused}");
            assert!(refused.ends_with(&format!("{message}\n")), "{refused}");
        }
    }

    #[test]
    fn each_jitter_is_read_by_the_cores_own_name() {
        for jitter in JITTERS {
            let file = format!(
                "attempts = 2\nbackoff = \"exponential\"\nbase_delay = \"1s\"\nmax_delay = \"2s\"\njitter = \"{}\"",
                jitter.as_str()
            );
            assert_eq!(policy(&file).map(|p| p.jitter_mode()), Ok(jitter));
        }
    }

    #[test]
    fn durations_take_any_unit_and_round_up_to_the_microsecond() {
        let file = "attempts = 2\nbackoff = \"constant\"\nbase_delay = \"1500ns\"\nmax_delay = \"1h 1us\"";
        let read = policy(file).unwrap();
        assert_eq!(
            (read.base_delay(), read.max_delay()),
            (Duration::from_micros(2), Duration::from_micros(3_600_000_001))
        );
    }

    /// The keys no builder call could be made with, each refused with what to write instead.
    #[test]
    fn keys_that_do_not_go_together_are_refused_saying_what_is_missing() {
        let refusals = [
            (
                "attempts = 3\nbackoff = \"exponential\"\nbase_delay = \"1s\"",
                "an exponential backoff needs `base_delay` and `max_delay`: the first delay, and the most any delay grows to",
            ),
            (
                "attempts = 3\nbackoff = \"constant\"",
                "a constant backoff needs `base_delay`: the delay before each retry",
            ),
            (
                "attempts = 3",
                r#"a policy of more than one attempt needs a `backoff`: "exponential" or "constant", with its delays"#,
            ),
            (
                "attempts = 64",
                r#"a policy of more than one attempt needs a `backoff`: "exponential" or "constant", with its delays"#,
            ),
            (
                "attempts = 1\nbase_delay = \"1s\"",
                r#"`base_delay` and `max_delay` need a `backoff` to apply to: "exponential" or "constant""#,
            ),
        ];
        for (file, message) in refusals {
            assert_eq!(policy(file), Err(format!("{message}\n")), "{file}");
        }
        let queue_alone = "window = \"10s\"\nbulkhead_queue = { places = 64, max_wait = \"200ms\" }";
        let message = ConfigError::BulkheadQueueWithoutBulkhead.message();
        assert_eq!(dependency(queue_alone), Err(format!("{message}\n")));
        // An adaptive limit without a bulkhead, or with a floor above it, is refused for the whole
        // dependency: the limit alone is fine.
        for (file, error) in [
            ("adaptive_limit = { slow = \"1s\" }", ConfigError::AdaptiveLimitWithoutBulkhead),
            (
                "bulkhead = 4\nadaptive_limit = { slow = \"1s\", min_slots = 5 }",
                ConfigError::AdaptiveLimitFloorOutOfRange,
            ),
        ] {
            let file = format!("window = \"10s\"\n{file}");
            assert_eq!(dependency(&file), Err(format!("{}\n", error.message())), "{file}");
        }
    }

    /// What the builders refuse, a file cannot slip past: the same error, with the same message.
    #[test]
    fn a_policy_the_builder_refuses_is_refused_with_the_builders_message() {
        for (file, error) in [
            ("attempts = 0", ConfigError::MaxAttemptsOutOfRange),
            ("attempts = 65", ConfigError::MaxAttemptsOutOfRange),
            (
                "attempts = 65\nbackoff = \"constant\"\nbase_delay = \"1s\"",
                ConfigError::MaxAttemptsOutOfRange,
            ),
            (
                "attempts = 3\nbackoff = \"exponential\"\nbase_delay = \"2s\"\nmax_delay = \"1s\"",
                ConfigError::MaxDelayBelowBaseDelay,
            ),
            (
                "attempts = 3\nbackoff = \"exponential\"\nbase_delay = \"0s\"\nmax_delay = \"1s\"",
                ConfigError::ZeroBaseDelay,
            ),
            ("attempts = 1\nattempt_timeout = \"0s\"", ConfigError::ZeroAttemptTimeout),
        ] {
            assert_eq!(policy(file), Err(format!("{}\n", error.message())), "{file}");
        }
    }

    /// A misspelt key, a name that is none of the choices, a duration without its unit: each
    /// refused where it is in the file.
    #[test]
    fn a_misspelt_key_a_wrong_name_or_a_bare_number_is_refused_where_it_is() {
        assert_eq!(
            policy("atempts = 3").unwrap_err(),
            "TOML parse error at line 1, column 1\n  |\n1 | atempts = 3\n  | ^^^^^^^\nunknown field `atempts`, \
             expected one of `attempts`, `backoff`, `base_delay`, `max_delay`, `multiplier`, `jitter`, \
             `attempt_timeout`, `min_remaining`, `retry_after_spread`\n"
        );
        let file = "attempts = 3\nbackoff = \"exponential\"\nbase_delay = \"1s\"\nmax_delay = \"2s\"\njitter = \"ful\"";
        assert_eq!(
            policy(file).unwrap_err(),
            "TOML parse error at line 5, column 10\n  |\n5 | jitter = \"ful\"\n  |          ^^^^^\nunknown variant \
             `ful`, expected one of `none`, `full`, `equal`, `decorrelated`\n"
        );
        let file = "attempts = 3\nbackoff = \"linear\"";
        assert!(
            policy(file)
                .unwrap_err()
                .ends_with("unknown variant `linear`, expected `exponential` or `constant`\n")
        );
        let file = "attempts = 3\nbackoff = \"constant\"\nbase_delay = 100";
        assert_eq!(
            policy(file).unwrap_err(),
            "TOML parse error at line 3, column 14\n  |\n3 | base_delay = 100\n  |              ^^^\ninvalid type: \
             integer `100`, expected a duration with its unit, such as \"100ms\", \"2s\" or \"1m 30s\"\n"
        );
        let file = "attempts = 3\nbackoff = \"constant\"\nbase_delay = \"100 parsecs\"";
        // Between the parentheses, humantime's own words, which change between its releases.
        let message = policy(file).unwrap_err();
        let (before, after) =
            message.split_once('(').zip(message.rsplit_once(')')).map(|(b, a)| (b.0, a.1)).unwrap();
        assert_eq!(
            (before, after),
            (
                "TOML parse error at line 3, column 14\n  |\n3 | base_delay = \"100 parsecs\"\n  |              \
                 ^^^^^^^^^^^^^\n`100 parsecs` is not a duration ",
                ": write one with its unit, such as \"100ms\", \"2s\" or \"1m 30s\"\n"
            )
        );
    }

    #[test]
    fn every_dependency_key_stands_for_its_builder_call() {
        let file = r#"
            window = "30s"
            budget = { kind = "token_bucket", capacity = 10, refill = 10, period = "60s", hold = "10s" }
            breaker = { trip = "failure_ratio", percent = 50, min_calls = 20, break_for = "15s", probes = 3, slow_calls = "2s" }
            bulkhead = 32
            bulkhead_queue = { places = 64, max_wait = "200ms" }
            adaptive_limit = { slow = "250ms", min_slots = 8, decrease_to_permille = 500 }
            rate_limit = { count = 100, period = "1s", burst = 10, max_wait = "50ms" }
            duty_cycle = { per_mille = 10, window = "1h" }
            cooldown = "2m"
            client_throttle = { k_permille = 2000 }
            latency_samples = 200
            critical_reserve = 20
        "#;
        let in_code = DependencyConfig::new(SECS(30))
            .budget(RetryBudget::token_bucket(10, 10, SECS(60), SECS(10)).unwrap())
            .breaker(BreakerConfig::failure_ratio(50, 20, SECS(15)).probes(3).slow_calls(SECS(2)))
            .bulkhead(32)
            .bulkhead_queue(64, MS(200))
            .adaptive_limit(relent_core::AdaptiveLimit::new(MS(250)).min_slots(8).decrease_to_permille(500))
            .rate_limit(RateLimit::new(100, SECS(1)).burst(10).max_wait(MS(50)))
            .duty_cycle(DutyCycle::per_mille(10, SECS(3_600)))
            .cooldown(SECS(120))
            .client_throttle(relent_core::ClientThrottle::K2)
            .latency_samples(200)
            .critical_reserve(20);
        assert_eq!(dependency(file), Ok(in_code));
    }

    #[test]
    fn each_budget_breaker_and_duty_cycle_shape_is_read() {
        let with = |part: &str| dependency(&format!("window = \"10s\"\n{part}"));
        let base = DependencyConfig::new(SECS(10));
        for (part, in_code) in [
            (r#"budget = { kind = "ratio", percent = 10 }"#, base.budget(RetryBudget::ratio(10, 0).unwrap())),
            (
                r#"breaker = { trip = "consecutive_failures", count = 5, break_for = "30s" }"#,
                base.breaker(BreakerConfig::consecutive_failures(5, SECS(30))),
            ),
            (
                r#"breaker = { trip = "count_window", size = 20, percent = 50, min_calls = 10, break_for = "30s" }"#,
                base.breaker(BreakerConfig::count_window(20, 50, 10, SECS(30))),
            ),
            (
                r#"duty_cycle = { airtime = "36s", window = "1h" }"#,
                base.duty_cycle(DutyCycle::new(SECS(36), SECS(3_600))),
            ),
            (r#"rate_limit = { count = 5, period = "1s" }"#, base.rate_limit(RateLimit::new(5, SECS(1)))),
            (
                "bulkhead = 100\nadaptive_limit = { slow = \"1s\" }",
                base.bulkhead(100).adaptive_limit(relent_core::AdaptiveLimit::new(SECS(1))),
            ),
        ] {
            assert_eq!(with(part), Ok(in_code), "{part}");
        }
    }

    /// A protection the builders refuse is refused with their message, at its own table: each is
    /// checked as it is read.
    #[test]
    fn a_protection_the_builders_refuse_is_refused_with_their_message_where_it_is() {
        let duty_message = "a duty cycle needs one of `airtime` (the airtime allowed in its window) and \
                            `per_mille` (the share of it)";
        for (line, message) in [
            (r#"budget = { kind = "ratio", percent = 110 }"#, ConfigError::BudgetPercentOutOfRange.message()),
            (
                r#"budget = { kind = "token_bucket", capacity = 0, refill = 1, period = "1s", hold = "5s" }"#,
                ConfigError::ZeroBudgetCapacity.message(),
            ),
            (
                r#"breaker = { trip = "consecutive_failures", count = 0, break_for = "1s" }"#,
                ConfigError::BreakerZeroConsecutiveFailures.message(),
            ),
            (r#"bulkhead = 0"#, ConfigError::ZeroBulkhead.message()),
            (r#"bulkhead_queue = { places = 0, max_wait = "1s" }"#, ConfigError::ZeroBulkheadQueue.message()),
            (r#"bulkhead_queue = { places = 4, max_wait = "0s" }"#, ConfigError::ZeroBulkheadWait.message()),
            (r#"rate_limit = { count = 10, period = "0s" }"#, ConfigError::ZeroRatePeriod.message()),
            (r#"duty_cycle = { airtime = "1s", window = "0s" }"#, ConfigError::ZeroDutyCycleWindow.message()),
            (r#"duty_cycle = { airtime = "36s", per_mille = 10, window = "1h" }"#, duty_message),
            (r#"duty_cycle = { window = "1h" }"#, duty_message),
            (r#"client_throttle = { k_permille = 900 }"#, ConfigError::ThrottleMultiplierBelowOne.message()),
            (r#"latency_samples = 19"#, ConfigError::LatencySamplesOutOfRange.message()),
            (r#"critical_reserve = 91"#, ConfigError::CriticalReserveOutOfRange.message()),
            (r#"adaptive_limit = { slow = "0s" }"#, ConfigError::AdaptiveLimitZeroSlow.message()),
            (
                r#"adaptive_limit = { slow = "1s", min_slots = 0 }"#,
                ConfigError::AdaptiveLimitFloorOutOfRange.message(),
            ),
            (
                r#"adaptive_limit = { slow = "1s", decrease_to_permille = 1000 }"#,
                ConfigError::AdaptiveLimitDecreaseOutOfRange.message(),
            ),
        ] {
            let (key, value) = line.split_once(" = ").unwrap();
            let at = key.len() + 3;
            let expected = format!(
                "TOML parse error at line 2, column {}\n  |\n2 | {line}\n  |{}{}\n{message}\n",
                at + 1,
                " ".repeat(at + 1),
                "^".repeat(value.len())
            );
            assert_eq!(dependency(&format!("window = \"10s\"\n{line}")), Err(expected), "{line}");
        }
    }

    /// The window, which is the dependency's own, is checked with the rest of it.
    #[test]
    fn a_window_the_builder_refuses_is_refused_with_its_message() {
        assert_eq!(dependency("window = \"10s\""), Ok(DependencyConfig::new(SECS(10))));
        assert_eq!(dependency("window = \"0s\""), Err(format!("{}\n", ConfigError::ZeroWindow.message())));
    }

    #[test]
    fn a_misspelt_key_or_shape_in_a_protection_is_refused_where_it_is() {
        let with = |part: &str| dependency(&format!("window = \"10s\"\n{part}")).unwrap_err();
        let table = r#"{ trip = "consecutive_failures", count = 5, break_fro = "30s" }"#;
        assert_eq!(
            with(&format!("breaker = {table}")),
            format!(
                "TOML parse error at line 2, column 11\n  |\n2 | breaker = {table}\n  |           {}\nunknown field \
                 `break_fro`, expected one of `count`, `break_for`, `probes`, `slow_calls`\n",
                "^".repeat(table.len())
            )
        );
        assert!(
            with(r#"budget = { kind = "percent", percent = 5 }"#)
                .ends_with("unknown variant `percent`, expected `ratio` or `token_bucket`\n")
        );
        assert!(with(r#"budget = { percent = 5 }"#).ends_with("missing field `kind`\n"));
        assert!(
            with(r#"bulkheads = 4"#)
                .contains("unknown field `bulkheads`, expected one of `window`, `budget`,")
        );
    }

    /// Not TOML alone: the same keys in JSON, and its refusals (with a line and column where JSON's
    /// parser has one).
    #[test]
    fn json_reads_the_same_keys() {
        let file = r#"{
            "window": "10s",
            "budget": { "kind": "ratio", "percent": 10, "floor": 5 },
            "breaker": { "trip": "count_window", "size": 20, "percent": 50, "min_calls": 10, "break_for": "30s" }
        }"#;
        let in_code = DependencyConfig::new(SECS(10))
            .budget(RetryBudget::ratio(10, 5).unwrap())
            .breaker(BreakerConfig::count_window(20, 50, 10, SECS(30)));
        assert_eq!(serde_json::from_str::<DependencySettings>(file).map(|d| d.0).ok(), Some(in_code));
        let file = r#"{ "attempts": 3, "backoff": "exponential", "base_delay": "2s", "max_delay": "1s" }"#;
        assert_eq!(
            serde_json::from_str::<PolicySettings>(file).unwrap_err().to_string(),
            ConfigError::MaxDelayBelowBaseDelay.message()
        );
        let file = r#"{ "attempts": 3, "jitter": "ful" }"#;
        assert_eq!(
            serde_json::from_str::<PolicySettings>(file).unwrap_err().to_string(),
            "unknown variant `ful`, expected one of `none`, `full`, `equal`, `decorrelated` at line 1 column 34"
        );
    }

    #[test]
    fn a_policy_and_a_dependency_are_written_with_the_keys_they_are_read_with() {
        let policy = RetryPolicy::exponential(3, MS(100), Duration::from_micros(1_500_250))
            .attempt_timeout(SECS(3))
            .build()
            .unwrap();
        assert_eq!(
            toml::to_string(&PolicySettings(policy)).unwrap(),
            "attempts = 3\nbackoff = \"exponential\"\nbase_delay = \"100ms\"\nmax_delay = \"1s 500ms 250us\"\n\
             attempt_timeout = \"3s\"\n"
        );
        let once = RetryPolicy::single_attempt().jitter(Jitter::None).build().unwrap();
        assert_eq!(toml::to_string(&PolicySettings(once)).unwrap(), "attempts = 1\njitter = \"none\"\n");
        let config = DependencyConfig::new(SECS(10))
            .budget(RetryBudget::ratio(10, 5).unwrap())
            .breaker(BreakerConfig::consecutive_failures(5, SECS(30)).slow_calls(SECS(2)))
            .duty_cycle(DutyCycle::per_mille(10, SECS(3_600)));
        assert_eq!(
            serde_json::to_string(&DependencySettings(config)).unwrap(),
            r#"{"window":"10s","budget":{"kind":"ratio","percent":10,"floor":5},"breaker":{"trip":"consecutive_failures","count":5,"break_for":"30s","slow_calls":"2s"},"duty_cycle":{"window":"1h","airtime":"36s"}}"#
        );
    }

    /// Any duration in microseconds up to three years (humantime writes days, months and years).
    fn span() -> impl Strategy<Value = Duration> {
        prop_oneof![Just(0), 0..2_000_000u64, 0..100_000_000_000_000u64].prop_map(Duration::from_micros)
    }

    fn jitter() -> impl Strategy<Value = Jitter> {
        proptest::sample::select(JITTERS.to_vec())
    }

    /// Every policy the builders accept, built with any of its setters.
    fn any_policy() -> impl Strategy<Value = RetryPolicy<HZ>> {
        // One attempt often: whether a policy is written as the single-attempt one turns on it.
        let delays = (prop_oneof![Just(1), 0..=65u8], any::<bool>(), span(), span());
        let setters = (
            jitter(),
            proptest::option::of(span()),
            proptest::option::of(span()),
            proptest::option::of(span()),
        );
        // An exponential backoff's multiplier: none (doubling), or any the builder may take.
        let multiplier = proptest::option::of(prop_oneof![Just(150u16), 101..=u16::MAX]);
        (delays, setters, any::<bool>(), multiplier).prop_filter_map(
            "the builder refuses it",
            |((attempts, exponential, base, max), (jitter, timeout, left, spread), single, multiplier)| {
                let mut builder = match (single, exponential, multiplier) {
                    (true, ..) => RetryPolicy::single_attempt(),
                    (false, true, None) => RetryPolicy::exponential(attempts, base, max),
                    (false, true, Some(percent)) => {
                        RetryPolicy::exponential(attempts, base, max).multiplier_percent(percent)
                    }
                    (false, false, _) => RetryPolicy::constant(attempts, base).max_delay(max),
                };
                builder = builder.jitter(jitter);
                if let Some(t) = timeout {
                    builder = builder.attempt_timeout(t);
                }
                if let Some(l) = left {
                    builder = builder.min_remaining(l);
                }
                if let Some(s) = spread {
                    builder = builder.retry_after_spread(s);
                }
                builder.build().ok()
            },
        )
    }

    fn any_breaker() -> impl Strategy<Value = BreakerConfig<HZ>> {
        let trip = prop_oneof![
            (any::<u32>(), span()).prop_map(|(count, b)| BreakerConfig::consecutive_failures(count, b)),
            (0..=101u8, any::<u32>(), span()).prop_map(|(p, m, b)| BreakerConfig::failure_ratio(p, m, b)),
            (1..=64u8)
                .prop_flat_map(|n| (Just(n), 0..=101u8, 0..=n, span()))
                .prop_map(|(n, p, m, b)| BreakerConfig::count_window(n, p, m, b)),
        ];
        (trip, proptest::option::of(any::<u8>()), proptest::option::of(span())).prop_map(
            |(b, probes, slow)| {
                let b = match probes {
                    Some(p) => b.probes(p),
                    None => b,
                };
                match slow {
                    Some(t) => b.slow_calls(t),
                    None => b,
                }
            },
        )
    }

    /// Every dependency configuration `validate` accepts, with any of its protections.
    fn any_dependency() -> impl Strategy<Value = DependencyConfig<HZ>> {
        let budget = prop_oneof![
            (0..=101u8, any::<u32>()).prop_map(|(p, f)| RetryBudget::ratio(p, f).ok()),
            (1..10_000u32, 1..10_000u32, span(), span())
                .prop_map(|(c, r, p, h)| RetryBudget::token_bucket(c, r, p, h).ok()),
        ];
        let rate = (any::<u32>(), span(), proptest::option::of(any::<u32>()), proptest::option::of(span()))
            .prop_map(|(count, period, burst, wait)| {
                let limit = RateLimit::new(count, period);
                let limit = burst.map_or(limit, |b| limit.burst(b));
                wait.map_or(limit, |w| limit.max_wait(w))
            });
        let duty = prop_oneof![
            span()
                .prop_flat_map(|w| (0..=w.as_ticks(), Just(w)))
                .prop_map(|(a, w)| DutyCycle::new(Duration::from_micros(a), w)),
            (0..=1_000u16, span()).prop_map(|(pm, w)| DutyCycle::per_mille(pm, w)),
        ];
        let protections = (
            proptest::option::of(budget),
            proptest::option::of(any_breaker()),
            proptest::option::of((
                any::<u16>(),
                proptest::option::of((any::<u16>(), span())),
                proptest::option::of((span(), any::<u16>(), any::<u16>())),
            )),
            proptest::option::of(rate),
            proptest::option::of(duty),
            proptest::option::of(span()),
            proptest::option::of(any::<u16>()),
            proptest::option::of(20..=4_000u16),
            proptest::option::of(1..=90u8),
        );
        (span(), protections).prop_filter_map(
            "validate refuses it",
            |(window, (budget, breaker, bulkhead, rate, duty, cooldown, throttle, latency, reserve))| {
                let mut config = DependencyConfig::new(window);
                if let Some(budget) = budget {
                    config = config.budget(budget?);
                }
                if let Some(b) = breaker {
                    config = config.breaker(b);
                }
                if let Some((slots, queue, adaptive)) = bulkhead {
                    config = config.bulkhead(slots);
                    if let Some((places, max_wait)) = queue {
                        config = config.bulkhead_queue(places, max_wait);
                    }
                    if let Some((slow, floor, kept)) = adaptive {
                        let limit = relent_core::AdaptiveLimit::new(slow)
                            .min_slots(floor % slots.saturating_add(1).max(1));
                        config = config.adaptive_limit(limit.decrease_to_permille(kept % 1_001));
                    }
                }
                if let Some(r) = rate {
                    config = config.rate_limit(r);
                }
                if let Some(d) = duty {
                    config = config.duty_cycle(d);
                }
                if let Some(c) = cooldown {
                    config = config.cooldown(c);
                }
                if let Some(k) = throttle {
                    config = config.client_throttle(relent_core::ClientThrottle::new(k));
                }
                if let Some(n) = latency {
                    config = config.latency_samples(n);
                }
                if let Some(r) = reserve {
                    config = config.critical_reserve(r);
                }
                config.validate().ok().map(|()| config)
            },
        )
    }

    /// `value` written as TOML and as JSON, and each read back as it was.
    fn reads_back<T>(value: T) -> Result<(), TestCaseError>
    where
        T: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug + Copy,
    {
        let toml = toml::to_string(&value).unwrap();
        prop_assert_eq!(toml::from_str::<T>(&toml).map_err(|e| e.to_string()), Ok(value), "{}", toml);
        let json = serde_json::to_string(&value).unwrap();
        prop_assert_eq!(serde_json::from_str::<T>(&json).map_err(|e| e.to_string()), Ok(value), "{}", json);
        Ok(())
    }

    proptest! {
        // About a quarter of what the strategies draw is refused by the builders, and filtered
        // out; proptest's default cap on that (65,536) would end a long run early.
        #![proptest_config(ProptestConfig { max_local_rejects: 1 << 24, ..ProptestConfig::default() })]

        /// Whatever the builders accept is written so that reading it back, as TOML or as JSON,
        /// gives the same policy: every key goes to the argument it came from.
        #[test]
        fn every_policy_reads_back_as_it_was_written(policy in any_policy()) {
            reads_back(PolicySettings(policy))?;
        }

        /// The same for every dependency configuration `validate` accepts.
        #[test]
        fn every_dependency_reads_back_as_it_was_written(config in any_dependency()) {
            reads_back(DependencySettings(config))?;
        }

        /// Any set of overrides is written so that reading it back, as TOML or as JSON, gives the
        /// same rule for every status.
        #[test]
        fn every_classifier_reads_back_as_it_was_written(
            rules in proptest::collection::vec((100u16..1000, proptest::sample::select(vec![StatusRule::Retry, StatusRule::Fail, StatusRule::Success])), 0..12)
        ) {
            let classifier = rules
                .iter()
                .fold(StatusClassifier::default(), |c, &(code, rule)| c.rule(StatusCode::from_u16(code).unwrap(), rule));
            let settings = ClassifierSettings(classifier);
            let toml = toml::to_string(&settings).unwrap();
            let json = serde_json::to_string(&settings).unwrap();
            let from_toml = toml::from_str::<ClassifierSettings>(&toml).map_err(|e| e.to_string());
            let from_json = serde_json::from_str::<ClassifierSettings>(&json).map_err(|e| e.to_string());
            prop_assert_eq!(from_toml.map(|c| overrides(&c.0)), Ok(overrides(&settings.0)), "{}", toml);
            prop_assert_eq!(from_json.map(|c| overrides(&c.0)), Ok(overrides(&settings.0)), "{}", json);
        }
    }

    fn classifier(text: &str) -> Result<StatusClassifier, String> {
        toml::from_str::<ClassifierSettings>(text).map(|c| c.0).map_err(|e| e.to_string())
    }

    /// A classifier's overrides, by status.
    fn overrides(classifier: &StatusClassifier) -> Vec<(u16, StatusRule)> {
        let mut all: Vec<_> = classifier.overrides().map(|(s, r)| (s.as_u16(), r)).collect();
        all.sort_unstable_by_key(|&(s, _)| s);
        all
    }

    #[test]
    fn each_status_list_gives_its_rule_and_other_statuses_keep_their_defaults() {
        let file = "retry = [502, 504]\nfail = [409, 503]\nsuccess = [500]\n";
        let read = classifier(file).unwrap();
        let in_code = StatusClassifier::default()
            .rule(StatusCode::BAD_GATEWAY, StatusRule::Retry)
            .rule(StatusCode::GATEWAY_TIMEOUT, StatusRule::Retry)
            .rule(StatusCode::CONFLICT, StatusRule::Fail)
            .rule(StatusCode::SERVICE_UNAVAILABLE, StatusRule::Fail)
            .rule(StatusCode::INTERNAL_SERVER_ERROR, StatusRule::Success);
        assert_eq!(overrides(&read), overrides(&in_code));
        for code in 100..1000 {
            let status = StatusCode::from_u16(code).unwrap();
            assert_eq!(read.rule_for(status), in_code.rule_for(status), "{code}");
        }
        // Untouched: 429 retried, 501 a failure, 404 the caller's answer.
        assert_eq!(read.rule_for(StatusCode::TOO_MANY_REQUESTS), StatusRule::Retry);
        assert_eq!(read.rule_for(StatusCode::NOT_IMPLEMENTED), StatusRule::Fail);
        assert_eq!(read.rule_for(StatusCode::NOT_FOUND), StatusRule::Success);
        // Nothing at all is the default classifier, and a status twice in one list is once.
        assert_eq!(overrides(&classifier("").unwrap()), []);
        assert_eq!(overrides(&classifier("retry = [502, 502]").unwrap()), [(502, StatusRule::Retry)]);
        // The same keys in JSON.
        let json = serde_json::from_str::<ClassifierSettings>(
            r#"{"retry": [502, 504], "fail": [409, 503], "success": [500]}"#,
        );
        assert_eq!(overrides(&json.unwrap().0), overrides(&in_code));
    }

    #[test]
    fn a_status_in_two_lists_out_of_range_or_misspelt_is_refused_where_it_is() {
        // A status in two lists is found once the table is read: inside a service's file, the
        // parser names the table (below, `a_refusal_inside_a_services_file_names_its_table`).
        assert_eq!(
            classifier("retry = [502]\nsuccess = [404, 502]\n").unwrap_err(),
            "status 502 is in both `retry` and `success`: give each status one rule\n"
        );
        assert_eq!(
            classifier("fail = [409]\nsuccess = [409]\n").unwrap_err(),
            "status 409 is in both `fail` and `success`: give each status one rule\n"
        );
        // toml points at the list that holds it.
        for number in ["99", "1000", "-502", "70000"] {
            let line = format!("retry = [502, {number}]");
            assert_eq!(
                classifier(&line).unwrap_err(),
                format!(
                    "TOML parse error at line 1, column 9\n  |\n1 | {line}\n  |         {}\n`{number}` is not an HTTP \
                     status code: write one from 100 to 999, such as 502\n",
                    "^".repeat(line.len() - 8)
                )
            );
        }
        // The bounds themselves are statuses.
        assert_eq!(
            overrides(&classifier("fail = [100, 999]").unwrap()),
            [(100, StatusRule::Fail), (999, StatusRule::Fail)]
        );
        let misspelt = classifier("retries = [502]").unwrap_err();
        assert!(
            misspelt.contains("unknown field `retries`, expected one of `retry`, `fail`, `success`"),
            "{misspelt}"
        );
        let quoted = classifier(r#"retry = ["502"]"#).unwrap_err();
        assert!(quoted.contains("invalid type: string \"502\", expected i64"), "{quoted}");
    }

    #[test]
    fn a_classifier_is_written_with_its_overrides_by_rule_in_ascending_order() {
        let classifier = StatusClassifier::default()
            .rule(StatusCode::GATEWAY_TIMEOUT, StatusRule::Retry)
            .rule(StatusCode::CONFLICT, StatusRule::Fail)
            .rule(StatusCode::BAD_GATEWAY, StatusRule::Retry);
        let settings = ClassifierSettings(classifier);
        assert_eq!(toml::to_string(&settings).unwrap(), "retry = [502, 504]\nfail = [409]\n");
        assert_eq!(serde_json::to_string(&settings).unwrap(), r#"{"retry":[502,504],"fail":[409]}"#);
        assert_eq!(toml::to_string(&ClassifierSettings::default()).unwrap(), "");
    }

    #[cfg(feature = "tonic")]
    #[test]
    fn the_names_are_each_code_once_in_the_order_of_their_numbers() {
        let numbers: Vec<i32> = GRPC_NAMES.iter().map(|&(code, _)| i32::from(code)).collect();
        assert_eq!(numbers, (0..=16).collect::<Vec<_>>());
        for (code, name) in GRPC_NAMES {
            // tonic's own name for it, in CamelCase: the same words.
            assert_eq!(name.replace('_', ""), format!("{code:?}").to_uppercase(), "{code:?}");
        }
    }

    #[cfg(feature = "tonic")]
    fn grpc_classifier(text: &str) -> Result<crate::grpc::GrpcClassifier, String> {
        toml::from_str::<GrpcClassifierSettings>(text).map(|c| c.0).map_err(|e| e.to_string())
    }

    #[cfg(feature = "tonic")]
    #[test]
    fn each_grpc_code_list_gives_its_rule_and_other_codes_keep_their_defaults() {
        use tonic::Code;
        let read = grpc_classifier(
            "retry = [\"ABORTED\"]\nfail = [\"PERMISSION_DENIED\"]\nsuccess = [\"INTERNAL\"]\n",
        )
        .unwrap();
        let in_code = crate::grpc::GrpcClassifier::default()
            .rule(Code::Aborted, StatusRule::Retry)
            .rule(Code::PermissionDenied, StatusRule::Fail)
            .rule(Code::Internal, StatusRule::Success);
        for (code, _) in GRPC_NAMES {
            assert_eq!(read.rule_for(code), in_code.rule_for(code), "{code:?}");
        }
        assert_eq!(read.rule_for(Code::Unavailable), StatusRule::Retry);
        assert_eq!(read.rule_for(Code::DataLoss), StatusRule::Fail);
        assert_eq!(read.rule_for(Code::NotFound), StatusRule::Success);
        assert_eq!(grpc_classifier("").unwrap().overrides().count(), 0);
        // Written back in the order of the codes' numbers, and read back the same.
        let written = toml::to_string(&GrpcClassifierSettings(in_code.clone())).unwrap();
        assert_eq!(
            written,
            "retry = [\"ABORTED\"]\nfail = [\"PERMISSION_DENIED\"]\nsuccess = [\"INTERNAL\"]\n"
        );
        let every = GRPC_NAMES.iter().rev().fold(crate::grpc::GrpcClassifier::default(), |c, &(code, _)| {
            c.rule(
                code,
                [StatusRule::Retry, StatusRule::Fail, StatusRule::Success][i32::from(code) as usize % 3],
            )
        });
        let json = serde_json::to_string(&GrpcClassifierSettings(every.clone())).unwrap();
        assert!(json.starts_with(r#"{"retry":["OK","INVALID_ARGUMENT","ALREADY_EXISTS","#), "{json}");
        let back = serde_json::from_str::<GrpcClassifierSettings>(&json).unwrap().0;
        for (code, _) in GRPC_NAMES {
            assert_eq!(back.rule_for(code), every.rule_for(code), "{code:?}");
        }
    }

    #[cfg(feature = "tonic")]
    #[test]
    fn a_grpc_code_in_two_lists_or_misspelt_is_refused_where_it_is() {
        assert_eq!(
            grpc_classifier("retry = [\"ABORTED\"]\nfail = [\"ABORTED\"]\n").unwrap_err(),
            "code ABORTED is in both `retry` and `fail`: give each code one rule\n"
        );
        let line = "retry = [\"UNAVAILABLE\", \"Aborted\"]";
        assert_eq!(
            grpc_classifier(line).unwrap_err(),
            format!(
                "TOML parse error at line 1, column 9\n  |\n1 | {line}\n  |         {}\n`Aborted` is not the name of a \
                 gRPC status code: write one as gRPC's documents do, such as UNAVAILABLE or ABORTED\n",
                "^".repeat(line.len() - 8)
            )
        );
        let number = grpc_classifier("retry = [14]").unwrap_err();
        assert!(number.contains("invalid type: integer `14`, expected a string"), "{number}");
    }

    /// Inside a service's own configuration, a refusal names the table it is in: which dependency,
    /// which policy.
    #[test]
    fn a_refusal_inside_a_services_file_names_its_table() {
        #[derive(Debug, serde::Deserialize, serde::Serialize)]
        #[allow(dead_code)] // read for its errors
        struct Service {
            dependencies: std::collections::BTreeMap<String, DependencySettings>,
            policies: std::collections::BTreeMap<String, PolicySettings>,
            #[serde(default)]
            statuses: std::collections::BTreeMap<String, ClassifierSettings>,
        }
        let file = "[dependencies.payrail]\nwindow = \"10s\"\n\n[policies.checkout]\nattempts = 3\n";
        assert_eq!(
            toml::from_str::<Service>(file).unwrap_err().to_string(),
            "TOML parse error at line 4, column 1\n  |\n4 | [policies.checkout]\n  | ^^^^^^^^^^^^^^^^^^^\na policy \
             of more than one attempt needs a `backoff`: \"exponential\" or \"constant\", with its delays\n"
        );
        let file =
            "[dependencies.payrail]\nwindow = \"10s\"\n\n[statuses.payrail]\nretry = [502]\nfail = [502]\n";
        assert_eq!(
            toml::from_str::<Service>(file).unwrap_err().to_string(),
            "TOML parse error at line 4, column 1\n  |\n4 | [statuses.payrail]\n  | ^^^^^^^^^^^^^^^^^^\nstatus 502 is in \
             both `retry` and `fail`: give each status one rule\n"
        );
    }
}
