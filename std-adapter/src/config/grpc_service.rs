//! gRPC's service config (features `serde` and `tonic`): the retry policies a gRPC client reads,
//! method by method, read from the same JSON and put in Relent's terms.
//!
//! Why: a team that moves a gRPC client onto Relent has its numbers tuned already, in the service
//! config gRPC clients read (gRFC A6, "gRPC Retry Design", and grpc's `service_config.proto`).
//! Copying them by hand, setting by setting (`docs/coming-from.md`), is where a code drops out of
//! a list, or a method's `timeout` becomes an attempt's. [`GrpcServiceConfig`] reads the file
//! itself, and gives each method what gRPC would have applied to it: its policy, its classifier and
//! its deadline ([`GrpcMethodConfig`]), found by gRPC's rule (the method's own entry, else its
//! service's, else the default); and the channel's `retryThrottling` as the retry budget nearest
//! it ([`GrpcServiceConfig::retry_budget`]).
//!
//! What it does not do is decide that a call may be repeated: a method listed with a retry policy
//! still needs a [`ReplaySafety`](relent_core::ReplaySafety) on each call, as everywhere in Relent.
//!
//! A file is refused, never half read, where gRPC refuses it (a retry policy without codes, a
//! `maxAttempts` of 1, two entries naming one method), and where Relent has no equivalent: a
//! `backoffMultiplier` below 1 (a shrinking delay) or finer than a hundredth (Relent's multiplier is
//! in hundredths: 1.5, not 1.555), and `hedgingPolicy` (Relent sends one hedge, after a delay given
//! to `execute_hedged`). gRPC's other keys (load balancing, health
//! checks, message sizes, and `waitForReady`, which tonic has no setting for: a call on a channel
//! that cannot connect fails with UNAVAILABLE, which a retry policy retries as any) are read and
//! left alone; any key gRPC does not define is refused, so that a misspelt one is not silently
//! left out. Each
//! key is read in gRPC's JSON spelling (`maxAttempts`) or protobuf's (`max_attempts`), as proto3's
//! JSON mapping allows.

use std::collections::HashMap;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, Visitor};
use tonic::Code;

use relent_core::{RetryBudget, RetryPolicy};

use crate::clock::{Duration, HZ, ticks};
use crate::grpc::GrpcClassifier;
use crate::http::StatusRule;

/// A gRPC service config, as gRPC clients read it from JSON: deserialize this (with `serde_json`),
/// then take each method's configuration with [`method`](Self::method).
///
/// ```
/// use relent_tokio::config::GrpcServiceConfig;
/// use relent_tokio::core::{RetryBudget, RetryPolicy};
/// use relent_tokio::http::StatusRule;
/// use relent_tokio::Duration;
/// use tonic::Code;
///
/// let channel: GrpcServiceConfig = serde_json::from_str(r#"{
///     "methodConfig": [{
///         "name": [{ "service": "pricing.Pricing" }],
///         "timeout": "5s",
///         "retryPolicy": {
///             "maxAttempts": 4,
///             "initialBackoff": "0.1s",
///             "maxBackoff": "2s",
///             "backoffMultiplier": 2,
///             "retryableStatusCodes": ["UNAVAILABLE", "ABORTED"],
///             "perAttemptRecvTimeout": "1s"
///         }
///     }, {
///         "name": [{ "service": "pricing.Pricing", "method": "Reserve" }],
///         "timeout": "2s"
///     }],
///     "retryThrottling": { "maxTokens": 10, "tokenRatio": 0.1 }
/// }"#)?;
///
/// // A method of the service gets the service's entry: the same policy as in code.
/// let quote = channel.method("pricing.Pricing", "Quote");
/// let in_code = RetryPolicy::exponential(4, Duration::from_millis(100), Duration::from_secs(2))
///     .attempt_timeout(Duration::from_secs(1))
///     .build()?;
/// assert_eq!(quote.policy(), in_code);
/// assert_eq!(quote.timeout(), Some(Duration::from_secs(5)));
/// // The listed codes are retried, and UNAVAILABLE's companion by default is not.
/// assert_eq!(quote.classifier().rule_for(Code::Aborted), StatusRule::Retry);
/// assert_eq!(quote.classifier().rule_for(Code::ResourceExhausted), StatusRule::Fail);
///
/// // A method with an entry of its own gets that, here one attempt.
/// assert_eq!(channel.method("pricing.Pricing", "Reserve").policy().max_attempts(), 1);
/// // The channel's throttling, as the ratio budget nearest it.
/// assert_eq!(channel.retry_budget(), Some(RetryBudget::ratio(10, 4)?));
///
/// // A multiplier other than 2 is the policy's (in hundredths); one finer than that is refused,
/// // saying why.
/// let steeper = |multiplier: &str| serde_json::from_str::<GrpcServiceConfig>(&format!(r#"{{ "methodConfig": [{{
///     "name": [{{ "service": "pricing.Pricing" }}],
///     "retryPolicy": {{ "maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "2s",
///                      "backoffMultiplier": {multiplier}, "retryableStatusCodes": ["UNAVAILABLE"] }} }}] }}"#));
/// let policy = steeper("1.5")?.method("pricing.Pricing", "Quote").policy();
/// assert_eq!(policy.nominal_delay(3), Duration::from_millis(225));
/// assert!(steeper("1.555").unwrap_err().to_string().starts_with("backoffMultiplier 1.555: Relent takes it in hundredths"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// What each key becomes:
///
/// | service config | Relent |
/// |---|---|
/// | `maxAttempts` | the policy's attempts, the first included; above 5 it is 5, as gRPC clients cap it |
/// | `initialBackoff`, `maxBackoff` | an exponential policy's base and maximum delays, with full jitter: gRPC's `random(0, min(initialBackoff × backoffMultiplier^(n-1), maxBackoff))` |
/// | `backoffMultiplier` | the exponential policy's multiplier, in hundredths ([`multiplier_percent`](relent_core::RetryPolicyBuilder::multiplier_percent); 2 is doubling); or 1, a constant backoff of `initialBackoff` |
/// | `retryableStatusCodes` (names or numbers) | each code [`StatusRule::Retry`]; `UNAVAILABLE` and `RESOURCE_EXHAUSTED`, which the classifier retries by default, [`StatusRule::Fail`] unless listed |
/// | `perAttemptRecvTimeout` | the policy's attempt timeout |
/// | `timeout` | [`GrpcMethodConfig::timeout`]: the operation's deadline, for its [`Context`](relent_core::Context) |
/// | `retryThrottling` | [`retry_budget`](Self::retry_budget) |
/// | a method without `retryPolicy`, or with no entry | one attempt, the default classifier |
///
/// Whatever the list, the classifier retries a call that ended without the server's answer (an
/// attempt past its timeout, by tonic's timer or Relent's, and a call the connection closed under
/// before it was sent: the `grpc` module doc), as Relent retries any attempt that times out.
///
/// One difference remains: the policy's maximum delay is also the longest server pushback it
/// waits for (a longer one defers the operation, as a long `Retry-After` does), where gRPC waits
/// for any.
#[derive(Debug, Clone, Default)]
pub struct GrpcServiceConfig {
    entries: Vec<GrpcMethodConfig>,
    /// The entries naming each service: its own, and its methods', by method.
    services: HashMap<String, Named>,
    /// The entry for every method no other entry names.
    default: Option<usize>,
    /// What a method no entry names gets: one attempt.
    unnamed: GrpcMethodConfig,
    throttling: Option<Throttling>,
}

/// The entries that name one service: for the service alone, and for each of its methods.
#[derive(Debug, Clone, Default)]
struct Named {
    service: Option<usize>,
    methods: HashMap<String, usize>,
}

/// What gRPC would apply to one method: its retry policy, its classifier and its timeout.
#[derive(Debug, Clone)]
pub struct GrpcMethodConfig {
    policy: RetryPolicy<HZ>,
    classifier: GrpcClassifier,
    timeout: Option<Duration>,
}

impl Default for GrpcMethodConfig {
    fn default() -> Self {
        Self { policy: ONE_ATTEMPT, classifier: GrpcClassifier::default(), timeout: None }
    }
}

impl GrpcServiceConfig {
    /// The configuration gRPC applies to `method` of `service` (`"pkg.Service"`, `"Method"`, as
    /// a call's path `/pkg.Service/Method` names them): the entry naming both, else the entry
    /// naming the service alone, else the default entry (one whose name has no service), else
    /// one attempt with the default classifier and no timeout.
    ///
    /// A lookup hashes the names (and allocates nothing): a caller on a hot path looks its
    /// methods up once and keeps what this returns.
    pub fn method(&self, service: &str, method: &str) -> &GrpcMethodConfig {
        let named = self.services.get(service);
        named
            .and_then(|n| n.methods.get(method).or(n.service.as_ref()))
            .or(self.default.as_ref())
            .map_or(&self.unnamed, |&i| &self.entries[i])
    }

    /// The channel's `retryThrottling`, as the ratio budget nearest it, or `None` without one. A
    /// policy of more than one attempt needs a budget on its dependency, so a file with retry
    /// policies and no throttling leaves the budget to the service's own configuration.
    ///
    /// gRPC keeps one count of tokens per channel: `maxTokens` at first, each failed call takes one
    /// and each successful call gives back `tokenRatio`, and no call is retried while half the
    /// tokens or fewer are left. In the long run that retries at most `tokenRatio` failures for
    /// each success; from a full count, `ceil(maxTokens / 2) - 1` failures in a row. The ratio
    /// budget is those two numbers: `tokenRatio` as a percentage of the dependency's calls (0.1 is
    /// 10 %, rounded down, 100 % at most) and the rest as its floor, over the dependency's window.
    /// Its counts start again each window, where gRPC's carry over until they are earned back.
    pub fn retry_budget(&self) -> Option<RetryBudget<HZ>> {
        self.throttling.map(|Throttling(budget)| budget)
    }
}

impl GrpcMethodConfig {
    /// The method's retry policy: `retryPolicy`'s, or one attempt without it.
    pub fn policy(&self) -> RetryPolicy<HZ> {
        self.policy
    }

    /// How the method's statuses are judged: `retryableStatusCodes` retried, the rest as
    /// [`GrpcClassifier::default`] judges them, but for its two retried codes, not retried unless
    /// listed.
    pub fn classifier(&self) -> &GrpcClassifier {
        &self.classifier
    }

    /// The method's `timeout`: how long a call may take, retries and waits included, which is the
    /// operation's deadline. `None` where the file sets none (gRPC's calls then have no deadline,
    /// and the caller gives one of its own).
    pub fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
}

/// What a method without a retry policy gets. Built as the crate is compiled: a policy of one
/// attempt has nothing to refuse.
const ONE_ATTEMPT: RetryPolicy<HZ> = match RetryPolicy::single_attempt().build() {
    Ok(policy) => policy,
    Err(e) => panic!("{}", e.message()),
};

/// `retryThrottling`, as the ratio budget nearest it (see [`GrpcServiceConfig::retry_budget`]).
#[derive(Debug, Clone, Copy)]
struct Throttling(RetryBudget<HZ>);

impl<'de> Deserialize<'de> for GrpcServiceConfig {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawServiceConfig::deserialize(deserializer)?;
        let mut config = Self { throttling: raw.retry_throttling, ..Self::default() };
        for entry in raw.method_config {
            let index = config.entries.len();
            for name in &entry.name {
                let taken = match (name.service.as_str(), name.method.as_str()) {
                    ("", "") => config.default.replace(index).is_some(),
                    ("", method) => {
                        return Err(de::Error::custom(format_args!(
                            "a name has the method `{method}` and no service: give the service too \
                             (`\"service\": \"pkg.Service\"`), or neither for the default entry"
                        )));
                    }
                    (service, "") => config
                        .services
                        .entry(service.to_owned())
                        .or_default()
                        .service
                        .replace(index)
                        .is_some(),
                    (service, method) => {
                        let named = config.services.entry(service.to_owned()).or_default();
                        named.methods.insert(method.to_owned(), index).is_some()
                    }
                };
                if taken {
                    let named = match (name.service.as_str(), name.method.as_str()) {
                        ("", _) => "the default (no service)".to_owned(),
                        (service, "") => format!("the service `{service}`"),
                        (service, method) => format!("the method `{service}/{method}`"),
                    };
                    return Err(de::Error::custom(format_args!(
                        "{named} is named by two methodConfig entries: gRPC refuses such a service config; \
                         name it in one"
                    )));
                }
            }
            let (policy, classifier) = match entry.retry_policy {
                Some(Retries { policy, classifier }) => (policy, classifier),
                None => (ONE_ATTEMPT, GrpcClassifier::default()),
            };
            config.entries.push(GrpcMethodConfig { policy, classifier, timeout: entry.timeout.map(|t| t.0) });
        }
        Ok(config)
    }
}

/// The service config's keys. Those gRPC reads for other things than retries are taken and left
/// alone; any other is refused.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawServiceConfig {
    #[serde(default, rename = "methodConfig", alias = "method_config")]
    method_config: Vec<RawMethodConfig>,
    #[serde(default, rename = "retryThrottling", alias = "retry_throttling")]
    retry_throttling: Option<Throttling>,
    #[serde(default, rename = "loadBalancingPolicy", alias = "load_balancing_policy")]
    _load_balancing_policy: Option<IgnoredAny>,
    #[serde(default, rename = "loadBalancingConfig", alias = "load_balancing_config")]
    _load_balancing_config: Option<IgnoredAny>,
    #[serde(default, rename = "healthCheckConfig", alias = "health_check_config")]
    _health_check_config: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMethodConfig {
    #[serde(default)]
    name: Vec<RawName>,
    #[serde(default)]
    timeout: Option<ProtoDuration>,
    #[serde(default, rename = "retryPolicy", alias = "retry_policy")]
    retry_policy: Option<Retries>,
    #[serde(default, rename = "hedgingPolicy", alias = "hedging_policy")]
    _hedging_policy: Option<NoHedging>,
    #[serde(default, rename = "waitForReady", alias = "wait_for_ready")]
    _wait_for_ready: Option<IgnoredAny>,
    #[serde(default, rename = "maxRequestMessageBytes", alias = "max_request_message_bytes")]
    _max_request_message_bytes: Option<IgnoredAny>,
    #[serde(default, rename = "maxResponseMessageBytes", alias = "max_response_message_bytes")]
    _max_response_message_bytes: Option<IgnoredAny>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawName {
    #[serde(default)]
    service: String,
    #[serde(default)]
    method: String,
}

/// A `retryPolicy`, checked as it is read, so that the parser says where a refused one is.
struct Retries {
    policy: RetryPolicy<HZ>,
    classifier: GrpcClassifier,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRetryPolicy {
    #[serde(rename = "maxAttempts", alias = "max_attempts")]
    max_attempts: i64,
    #[serde(rename = "initialBackoff", alias = "initial_backoff")]
    initial_backoff: ProtoDuration,
    #[serde(rename = "maxBackoff", alias = "max_backoff")]
    max_backoff: ProtoDuration,
    #[serde(rename = "backoffMultiplier", alias = "backoff_multiplier")]
    backoff_multiplier: f64,
    #[serde(rename = "retryableStatusCodes", alias = "retryable_status_codes")]
    retryable_status_codes: Vec<StatusCode>,
    #[serde(default, rename = "perAttemptRecvTimeout", alias = "per_attempt_recv_timeout")]
    per_attempt_recv_timeout: Option<ProtoDuration>,
}

/// gRPC clients cap a policy's attempts at this, without refusing a larger number (gRFC A6).
const GRPC_MAX_ATTEMPTS: i64 = 5;

impl<'de> Deserialize<'de> for Retries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let raw = RawRetryPolicy::deserialize(deserializer)?;
        if raw.max_attempts < 2 {
            return Err(de::Error::custom(format_args!(
                "maxAttempts {}: a retry policy needs 2 attempts at least (the first call counts), as gRPC \
                 requires; for a method sent once, leave its retryPolicy out",
                raw.max_attempts
            )));
        }
        let attempts = raw.max_attempts.min(GRPC_MAX_ATTEMPTS) as u8;
        let (base, max) = (raw.initial_backoff.0, raw.max_backoff.0);
        let multiplier = raw.backoff_multiplier;
        let builder = if multiplier == 1.0 && max >= base {
            // Each delay random(0, initialBackoff): a constant backoff with full jitter.
            RetryPolicy::constant(attempts, base)
        } else if multiplier == 1.0 {
            return Err(de::Error::custom(
                "maxBackoff is shorter than initialBackoff: raise maxBackoff to at least initialBackoff",
            ));
        } else if multiplier > 1.0 {
            // gRPC's `initialBackoff × backoffMultiplier^(n-1)`, in hundredths (2 is doubling).
            let percent = super::Multiplier::percent(multiplier)
                .map_err(|why| de::Error::custom(format_args!("backoffMultiplier {multiplier}: {why}")))?;
            RetryPolicy::exponential(attempts, base, max).multiplier_percent(percent)
        } else if multiplier > 0.0 {
            return Err(de::Error::custom(format_args!(
                "backoffMultiplier {multiplier}: a multiplier below 1 shrinks each delay, which Relent's \
                 backoff does not do: give 1 for the same delay each time, or more than 1 (2 doubles it)"
            )));
        } else {
            return Err(de::Error::custom(format_args!(
                "backoffMultiplier {multiplier}: it must be more than 0, as gRPC requires: 1 for the same \
                 delay each time, more than 1 (2 doubles it) for a growing one"
            )));
        };
        let builder = match raw.per_attempt_recv_timeout {
            Some(timeout) => builder.attempt_timeout(timeout.0),
            None => builder,
        };
        // The builder's message says how to fix it in its own words ("the maximum delay is shorter
        // than the base delay"): the keys are named beside them.
        let policy = builder.build().map_err(|e| {
            de::Error::custom(format_args!(
                "{e} (the base delay is initialBackoff, the maximum maxBackoff, the attempt timeout \
                 perAttemptRecvTimeout)"
            ))
        })?;
        if raw.retryable_status_codes.is_empty() {
            return Err(de::Error::custom(
                "retryableStatusCodes is empty: list the codes to retry, such as UNAVAILABLE (gRPC refuses a \
                 retry policy without one)",
            ));
        }
        let defaults = [Code::Unavailable, Code::ResourceExhausted];
        let classifier =
            defaults.into_iter().fold(GrpcClassifier::default(), |c, code| c.rule(code, StatusRule::Fail));
        let classifier = raw
            .retryable_status_codes
            .iter()
            .fold(classifier, |c, &StatusCode(code)| c.rule(code, StatusRule::Retry));
        Ok(Self { policy, classifier })
    }
}

/// A `hedgingPolicy`, always refused: Relent sends one hedge, after a delay the call gives.
struct NoHedging;

impl<'de> Deserialize<'de> for NoHedging {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer)?;
        Err(de::Error::custom(
            "hedgingPolicy is not read: Relent hedges a call with `Dependency::execute_hedged`, one hedge after \
             the delay it is given (hedgingDelay), under a retry policy; take the hedgingPolicy out of the \
             file and give its delay to the call",
        ))
    }
}

impl<'de> Deserialize<'de> for Throttling {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Raw {
            #[serde(rename = "maxTokens", alias = "max_tokens")]
            max_tokens: i64,
            #[serde(rename = "tokenRatio", alias = "token_ratio")]
            token_ratio: f64,
        }
        let raw = Raw::deserialize(deserializer)?;
        if !(1..=1000).contains(&raw.max_tokens) {
            return Err(de::Error::custom(format_args!(
                "maxTokens {}: gRPC reads 1 to 1000 tokens",
                raw.max_tokens
            )));
        }
        // gRPC keeps three decimals of the ratio.
        let milli = (raw.token_ratio * 1000.0).round();
        if milli.is_nan() || milli < 1.0 {
            return Err(de::Error::custom(format_args!(
                "tokenRatio {}: it must be 0.001 or more (gRPC keeps three decimals)",
                raw.token_ratio
            )));
        }
        // From a full count, failures are retried until half the tokens or fewer are left.
        let floor = (raw.max_tokens as u32).div_ceil(2) - 1;
        let percent = (milli / 10.0).floor().min(100.0) as u8;
        RetryBudget::ratio(percent, floor).map(Self).map_err(de::Error::custom)
    }
}

/// A status code, by its name (`"UNAVAILABLE"`) or its number (`14`), as gRPC reads them.
#[derive(Debug, Clone, Copy)]
struct StatusCode(Code);

impl<'de> Deserialize<'de> for StatusCode {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Named;
        impl Visitor<'_> for Named {
            type Value = StatusCode;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(r#"a gRPC status code, by its name ("UNAVAILABLE") or its number (14)"#)
            }
            fn visit_str<E: de::Error>(self, name: &str) -> Result<StatusCode, E> {
                let code = super::grpc_code_named(name).ok_or_else(|| {
                    E::custom(format_args!(
                        "`{name}` is not the name of a gRPC status code: write one as gRPC's documents do, such \
                         as UNAVAILABLE or ABORTED, or its number"
                    ))
                })?;
                retryable(code)
            }
            fn visit_u64<E: de::Error>(self, number: u64) -> Result<StatusCode, E> {
                let code = super::GRPC_NAMES
                    .iter()
                    .map(|&(code, _)| code)
                    .find(|&c| u64::try_from(i32::from(c)) == Ok(number));
                let code = code.ok_or_else(|| {
                    E::custom(format_args!("{number} is not a gRPC status code: they are numbered 0 to 16"))
                })?;
                retryable(code)
            }
            fn visit_i64<E: de::Error>(self, number: i64) -> Result<StatusCode, E> {
                match u64::try_from(number) {
                    Ok(n) => self.visit_u64(n),
                    Err(_) => Err(E::custom(format_args!(
                        "{number} is not a gRPC status code: they are numbered 0 to 16"
                    ))),
                }
            }
        }
        fn retryable<E: de::Error>(code: Code) -> Result<StatusCode, E> {
            if code == Code::Ok {
                return Err(E::custom(
                    "OK is not a failure, and cannot be retried: take it out of retryableStatusCodes",
                ));
            }
            Ok(StatusCode(code))
        }
        deserializer.deserialize_any(Named)
    }
}

/// A duration as proto3's JSON writes one: seconds, with up to nine decimals, and `s` (`"0.1s"`,
/// `"2s"`). Every duration a retry policy holds must be more than zero.
#[derive(Debug, Clone, Copy)]
struct ProtoDuration(Duration);

/// protobuf's longest duration, 10,000 years (`google.protobuf.Duration`).
const PROTO_MAX_SECONDS: u64 = 315_576_000_000;

/// `text` as proto3's JSON duration, or why it is not one.
fn proto_duration(text: &str) -> Result<std::time::Duration, &'static str> {
    let number = text.strip_suffix('s').ok_or("it must end with `s`")?;
    if number.starts_with('-') {
        return Err("it must be more than zero");
    }
    let (whole, fraction) = match number.split_once('.') {
        Some((_, "")) => return Err("a decimal point must have digits after it"),
        Some((whole, fraction)) => (whole, fraction),
        None => (number, ""),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return Err("it must be a number of seconds, such as 0.1 or 2");
    }
    if fraction.len() > 9 {
        return Err("it has more than nine decimals (a nanosecond is the finest)");
    }
    let secs: u64 =
        whole.parse().map_err(|_| "it is longer than protobuf's longest duration, 10,000 years")?;
    if secs > PROTO_MAX_SECONDS {
        return Err("it is longer than protobuf's longest duration, 10,000 years");
    }
    // Nine digits at most: the nanoseconds, the fraction padded with zeros.
    let nanos = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(9)
        .fold(0u32, |n, b| n * 10 + u32::from(b - b'0'));
    let duration = std::time::Duration::new(secs, nanos);
    if duration.is_zero() {
        return Err("it must be more than zero");
    }
    Ok(duration)
}

impl<'de> Deserialize<'de> for ProtoDuration {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        proto_duration(&text).map(|d| Self(ticks(d))).map_err(|why| {
            de::Error::custom(format_args!(
                r#"`{text}` is not a duration as a service config writes one ({why}): seconds with up to nine decimals and `s`, such as "0.1s" or "2s""#
            ))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(json: &str) -> Result<GrpcServiceConfig, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    fn with_policy(policy: &str) -> Result<GrpcServiceConfig, String> {
        read(&format!(
            r#"{{ "methodConfig": [{{ "name": [{{ "service": "s.S" }}], "retryPolicy": {policy} }}] }}"#
        ))
    }

    const RETRY: &str = r#""initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]"#;

    #[test]
    fn a_method_gets_its_own_entry_else_its_services_else_the_default_else_one_attempt() {
        let config = read(
            r#"{ "methodConfig": [
                { "name": [{ "service": "a.A", "method": "Get" }, { "service": "b.B", "method": "Put" }], "timeout": "1s" },
                { "name": [{ "service": "a.A" }], "timeout": "2s" },
                { "name": [{}], "timeout": "3s" }
            ] }"#,
        )
        .unwrap();
        let timeout = |s: &str, m: &str| config.method(s, m).timeout();
        assert_eq!(timeout("a.A", "Get"), Some(Duration::from_secs(1)));
        assert_eq!(timeout("b.B", "Put"), Some(Duration::from_secs(1)));
        assert_eq!(timeout("a.A", "List"), Some(Duration::from_secs(2)));
        assert_eq!(timeout("b.B", "Get"), Some(Duration::from_secs(3)));
        assert_eq!(timeout("c.C", "Get"), Some(Duration::from_secs(3)));

        let bare =
            read(r#"{ "methodConfig": [{ "name": [{ "service": "a.A" }], "timeout": "2s" }] }"#).unwrap();
        let unnamed = bare.method("c.C", "Get");
        assert_eq!((unnamed.timeout(), unnamed.policy()), (None, ONE_ATTEMPT));
        assert_eq!(bare.retry_budget(), None);
        // An entry without names applies to nothing.
        let nameless = read(r#"{ "methodConfig": [{ "timeout": "2s" }] }"#).unwrap();
        assert_eq!(nameless.method("a.A", "Get").timeout(), None);
    }

    #[test]
    fn a_retry_policy_is_the_policy_and_classifier_code_would_build() {
        let config = with_policy(
            r#"{ "maxAttempts": 3, "initialBackoff": "0.25s", "maxBackoff": "4s", "backoffMultiplier": 2,
                 "retryableStatusCodes": ["ABORTED", 14, "UNKNOWN"], "perAttemptRecvTimeout": "1.5s" }"#,
        )
        .unwrap();
        let method = config.method("s.S", "M");
        let in_code = RetryPolicy::exponential(3, Duration::from_millis(250), Duration::from_secs(4))
            .attempt_timeout(Duration::from_millis(1_500))
            .build()
            .unwrap();
        assert_eq!(method.policy(), in_code);
        let rules: Vec<_> = method.classifier().overrides().collect();
        assert_eq!(
            rules,
            [
                (Code::ResourceExhausted, StatusRule::Fail),
                (Code::Aborted, StatusRule::Retry),
                (Code::Unavailable, StatusRule::Retry),
                (Code::Unknown, StatusRule::Retry),
            ]
        );
        // A code no list names keeps its default.
        assert_eq!(method.classifier().rule_for(Code::NotFound), StatusRule::Success);
        assert_eq!(method.classifier().rule_for(Code::Internal), StatusRule::Fail);
    }

    #[test]
    fn attempts_above_five_are_five_as_grpc_clients_cap_them_and_one_is_refused() {
        let capped = with_policy(&format!(r#"{{ "maxAttempts": 9, {RETRY} }}"#)).unwrap();
        assert_eq!(capped.method("s.S", "M").policy().max_attempts(), 5);
        let once = with_policy(&format!(r#"{{ "maxAttempts": 1, {RETRY} }}"#)).unwrap_err();
        assert!(once.starts_with("maxAttempts 1: a retry policy needs 2 attempts at least"), "{once}");
        let negative = with_policy(&format!(r#"{{ "maxAttempts": -3, {RETRY} }}"#)).unwrap_err();
        assert!(negative.starts_with("maxAttempts -3:"), "{negative}");
    }

    #[test]
    fn a_multiplier_of_one_is_a_constant_backoff_others_above_it_grow_and_the_rest_are_refused() {
        let policy = |multiplier: &str, max: &str| {
            with_policy(&format!(
                r#"{{ "maxAttempts": 3, "initialBackoff": "0.2s", "maxBackoff": "{max}", "backoffMultiplier": {multiplier},
                     "retryableStatusCodes": ["UNAVAILABLE"] }}"#
            ))
            .map(|c| c.method("s.S", "M").policy())
        };
        assert_eq!(
            policy("1", "5s"),
            Ok(RetryPolicy::constant(3, Duration::from_millis(200)).build().unwrap())
        );
        let exponential = RetryPolicy::exponential(3, Duration::from_millis(200), Duration::from_secs(5));
        assert_eq!(policy("2.0", "5s").unwrap(), exponential.build().unwrap());
        assert_eq!(policy("1.5", "5s").unwrap(), exponential.multiplier_percent(150).build().unwrap());
        assert_eq!(policy("1.6", "5s").unwrap(), exponential.multiplier_percent(160).build().unwrap());
        assert_eq!(policy("1.6", "5s").unwrap().nominal_delay(3), Duration::from_millis(512));
        let shorter = policy("1", "0.1s").unwrap_err();
        assert!(shorter.starts_with("maxBackoff is shorter than initialBackoff"), "{shorter}");
        let shorter = policy("2", "0.1s").unwrap_err();
        assert!(shorter.starts_with("the maximum delay is shorter than the base delay"), "{shorter}");
        assert!(shorter.contains("the base delay is initialBackoff, the maximum maxBackoff"), "{shorter}");
        let finer = policy("1.555", "5s").unwrap_err();
        assert!(
            finer.starts_with(
                "backoffMultiplier 1.555: Relent takes it in hundredths, so give at most two decimals, such as \
                 1.56"
            ),
            "{finer}"
        );
        let shrinking = policy("0.5", "5s").unwrap_err();
        assert!(
            shrinking.starts_with("backoffMultiplier 0.5: a multiplier below 1 shrinks each delay"),
            "{shrinking}"
        );
        // Just above 1, finer than a hundredth: refused as any such multiplier is.
        let flat = policy("1.001", "5s").unwrap_err();
        assert!(
            flat.starts_with(
                "backoffMultiplier 1.001: Relent takes it in hundredths, so give at most two decimals, such as 1.01"
            ),
            "{flat}"
        );
        let zero = policy("0", "5s").unwrap_err();
        assert!(zero.starts_with("backoffMultiplier 0: it must be more than 0, as gRPC requires"), "{zero}");
    }

    #[test]
    fn a_retry_policy_without_codes_or_with_a_wrong_one_is_refused() {
        let policy = |codes: &str| {
            with_policy(&format!(
                r#"{{ "maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2,
                     "retryableStatusCodes": {codes} }}"#
            ))
        };
        let empty = policy("[]").unwrap_err();
        assert!(empty.starts_with("retryableStatusCodes is empty"), "{empty}");
        let lower = policy(r#"["unavailable"]"#).unwrap_err();
        assert!(lower.starts_with("`unavailable` is not the name of a gRPC status code"), "{lower}");
        let number = policy("[17]").unwrap_err();
        assert!(number.starts_with("17 is not a gRPC status code: they are numbered 0 to 16"), "{number}");
        let wrong = policy("[true]").unwrap_err();
        assert!(
            wrong.starts_with(r#"invalid type: boolean `true`, expected a gRPC status code, by its name ("UNAVAILABLE") or its number (14)"#),
            "{wrong}"
        );
        let ok = policy(r#"["OK"]"#).unwrap_err();
        assert!(ok.starts_with("OK is not a failure"), "{ok}");
        let missing = with_policy(
            r#"{ "maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s", "backoffMultiplier": 2 }"#,
        );
        assert!(missing.unwrap_err().starts_with("missing field `retryableStatusCodes`"));
    }

    #[test]
    fn grpcs_other_keys_are_left_alone_and_a_misspelt_one_is_refused() {
        let config = read(
            r#"{ "loadBalancingConfig": [{ "round_robin": {} }], "healthCheckConfig": { "serviceName": "" },
                 "methodConfig": [{ "name": [{ "service": "s.S" }], "waitForReady": true,
                                    "maxRequestMessageBytes": 1024, "maxResponseMessageBytes": 2048, "timeout": "1s" }] }"#,
        );
        assert_eq!(config.unwrap().method("s.S", "M").timeout(), Some(Duration::from_secs(1)));
        let typo = with_policy(&format!(r#"{{ "maxAttempts": 3, "perAttemptTimeout": "1s", {RETRY} }}"#))
            .unwrap_err();
        assert!(typo.starts_with("unknown field `perAttemptTimeout`"), "{typo}");
        let top = read(r#"{ "methodConfigs": [] }"#).unwrap_err();
        assert!(top.starts_with("unknown field `methodConfigs`"), "{top}");
    }

    #[test]
    fn protobufs_own_key_names_are_read_as_well() {
        let config = read(
            r#"{ "method_config": [{ "name": [{ "service": "s.S" }], "retry_policy": {
                   "max_attempts": 2, "initial_backoff": "1s", "max_backoff": "2s", "backoff_multiplier": 2,
                   "retryable_status_codes": ["UNAVAILABLE"], "per_attempt_recv_timeout": "3s" } }],
                 "retry_throttling": { "max_tokens": 100, "token_ratio": 0.5 } }"#,
        )
        .unwrap();
        let policy = config.method("s.S", "M").policy();
        assert_eq!((policy.max_attempts(), policy.attempt_timeout()), (2, Some(Duration::from_secs(3))));
        assert_eq!(config.retry_budget(), Some(RetryBudget::ratio(50, 49).unwrap()));
    }

    #[test]
    fn names_that_clash_or_lack_a_service_and_hedging_are_refused() {
        let twice = read(
            r#"{ "methodConfig": [{ "name": [{ "service": "s.S", "method": "M" }] },
                                               { "name": [{ "service": "s.S", "method": "M" }] }] }"#,
        );
        assert!(twice.unwrap_err().starts_with("the method `s.S/M` is named by two methodConfig entries"));
        let service =
            read(r#"{ "methodConfig": [{ "name": [{ "service": "s.S" }, { "service": "s.S" }] }] }"#);
        assert!(service.unwrap_err().starts_with("the service `s.S` is named by two"));
        let default = read(r#"{ "methodConfig": [{ "name": [{}] }, { "name": [{ "service": "" }] }] }"#);
        assert!(default.unwrap_err().starts_with("the default (no service) is named by two"));
        let lone = read(r#"{ "methodConfig": [{ "name": [{ "method": "M" }] }] }"#).unwrap_err();
        assert!(lone.starts_with("a name has the method `M` and no service"), "{lone}");
        let hedged = read(
            r#"{ "methodConfig": [{ "name": [{ "service": "s.S" }],
                               "hedgingPolicy": { "maxAttempts": 2, "hedgingDelay": "0.5s" } }] }"#,
        );
        assert!(hedged.unwrap_err().starts_with(
            "hedgingPolicy is not read: Relent hedges a call with `Dependency::execute_hedged`"
        ));
    }

    #[test]
    fn throttling_is_the_nearest_ratio_budget_and_out_of_range_numbers_are_refused() {
        let budget = |tokens: &str, ratio: &str| {
            read(&format!(r#"{{ "retryThrottling": {{ "maxTokens": {tokens}, "tokenRatio": {ratio} }} }}"#))
                .map(|c| c.retry_budget())
        };
        // From a full count of 10, 4 failures in a row are retried (the fifth leaves 5, half).
        assert_eq!(budget("10", "0.1"), Ok(Some(RetryBudget::ratio(10, 4).unwrap())));
        assert_eq!(budget("11", "0.1"), Ok(Some(RetryBudget::ratio(10, 5).unwrap())));
        assert_eq!(budget("1", "0.019"), Ok(Some(RetryBudget::ratio(1, 0).unwrap())));
        assert_eq!(budget("1000", "7"), Ok(Some(RetryBudget::ratio(100, 499).unwrap())));
        assert!(budget("0", "0.1").unwrap_err().starts_with("maxTokens 0: gRPC reads 1 to 1000 tokens"));
        assert!(budget("1001", "0.1").unwrap_err().starts_with("maxTokens 1001"));
        // The least ratio gRPC keeps: a thousandth, under a percent, so the floor alone.
        assert_eq!(budget("10", "0.001"), Ok(Some(RetryBudget::ratio(0, 4).unwrap())));
        assert!(budget("10", "0").unwrap_err().starts_with("tokenRatio 0: it must be 0.001 or more"));
        assert!(budget("10", "0.0004").unwrap_err().starts_with("tokenRatio 0.0004"));
    }

    #[test]
    fn a_duration_is_seconds_with_up_to_nine_decimals_and_an_s() {
        let ok = |text: &str| proto_duration(text).unwrap();
        assert_eq!(ok("2s"), std::time::Duration::from_secs(2));
        assert_eq!(ok("0.1s"), std::time::Duration::from_millis(100));
        assert_eq!(ok("1.000000001s"), std::time::Duration::new(1, 1));
        assert_eq!(ok("315576000000s"), std::time::Duration::from_secs(PROTO_MAX_SECONDS));
        for (text, why) in [
            ("2", "it must end with `s`"),
            ("100ms", "it must be a number of seconds, such as 0.1 or 2"),
            ("-1s", "it must be more than zero"),
            ("0s", "it must be more than zero"),
            ("0.000s", "it must be more than zero"),
            (".5s", "it must be a number of seconds, such as 0.1 or 2"),
            ("1.s", "a decimal point must have digits after it"),
            ("+1s", "it must be a number of seconds, such as 0.1 or 2"),
            ("1.0000000001s", "it has more than nine decimals (a nanosecond is the finest)"),
            ("315576000001s", "it is longer than protobuf's longest duration, 10,000 years"),
            ("99999999999999999999s", "it is longer than protobuf's longest duration, 10,000 years"),
        ] {
            assert_eq!(proto_duration(text), Err(why), "{text}");
        }
        let refused = with_policy(r#"{ "maxAttempts": 3, "initialBackoff": "100ms" }"#).unwrap_err();
        assert!(
            refused.starts_with(
                r#"`100ms` is not a duration as a service config writes one (it must be a number"#
            ),
            "{refused}"
        );
    }

    proptest::proptest! {
        #[test]
        fn every_duration_protobuf_writes_is_read_exactly(secs in 0..=PROTO_MAX_SECONDS, nanos in 0u32..1_000_000_000, decimals in 0usize..=9) {
            // Written with `decimals` digits, the nanoseconds below them dropped.
            let kept = nanos - nanos % 10u32.pow(9 - decimals as u32);
            let text = if decimals == 0 {
                format!("{secs}s")
            } else {
                format!("{secs}.{:0width$}s", kept / 10u32.pow(9 - decimals as u32), width = decimals)
            };
            let expected = std::time::Duration::new(secs, if decimals == 0 { 0 } else { kept });
            let read = proto_duration(&text);
            if expected.is_zero() {
                proptest::prop_assert_eq!(read, Err("it must be more than zero"));
            } else {
                proptest::prop_assert_eq!(read, Ok(expected));
            }
        }

        #[test]
        fn no_text_panics_the_duration_reader(text in "\\PC{0,24}") {
            let _ = proto_duration(&text);
        }
    }
}
