//! What a service does with relent-tokio's types, checked at compile time: it shares a dependency
//! and a layer between tasks on tokio's multi-threaded runtime, spawns the operations, and sends the
//! errors on as `Box<dyn Error + Send + Sync>` (what `anyhow` and most services' error types need).
//! A field that is not `Send` or `Sync` (an `Rc`, a `Cell`, a `dyn Fn` without `+ Send`) added to
//! any of them would break those services' builds; here it fails this test's build first.

use std::error::Error as StdError;

use relent_tokio::core::{
    Classify, Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::http::StatusClassifier;
use relent_tokio::{
    AttemptError, AttemptInfo, Dependency, Detailed, Duration, Error, HZ, HttpError, RequestDeadline, Retry,
    RetryLayer, RetryReport, SingleAttempt,
};

const fn send_sync<T: Send + Sync + 'static>() {}
const fn send<T: Send>(_: &T) {}

#[derive(Debug)]
struct Refused;

impl Classify<HZ> for Refused {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl StdError for Refused {}

/// A stand-in for an HTTP client: `Send + Sync` like hyper's.
#[derive(Clone)]
struct Client;

#[test]
fn shared_and_reported_types_are_send_and_sync() {
    send_sync::<Dependency>();
    send_sync::<RetryLayer>();
    send_sync::<Retry<Client>>();
    send_sync::<StatusClassifier>();
    send_sync::<RequestDeadline>();
    send_sync::<SingleAttempt>();
    send_sync::<RetryReport>();
    send_sync::<relent_tokio::Gauges>();
    send_sync::<AttemptInfo>();
    send_sync::<Error<Refused>>();
    send_sync::<AttemptError<Refused>>();
    send_sync::<Detailed<u32, Refused>>();
    send_sync::<HttpError<std::io::Error>>();
}

/// `?` into `anyhow::Error` or `Box<dyn Error + Send + Sync>` needs all three.
const fn boxes<E: StdError + Send + Sync + 'static>() {}

#[test]
fn errors_convert_into_send_and_sync_boxed_errors() {
    boxes::<Error<Refused>>();
    boxes::<AttemptError<Refused>>();
    boxes::<HttpError<std::io::Error>>();
}

#[test]
fn an_operation_spawns_on_the_multi_threaded_runtime() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5).unwrap());
    let dependency = Dependency::with_seed("payrail", config, 1).unwrap();
    let policy =
        RetryPolicy::exponential(3, Duration::from_millis(1), Duration::from_millis(2)).build().unwrap();
    let context =
        Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let operation = {
        let (dependency, calls) = (dependency.clone(), calls.clone());
        async move {
            dependency
                .execute(&policy, context, |_| {
                    let call = calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    async move { if call == 0 { Err(Refused) } else { Ok(call) } }
                })
                .await
        }
    };
    send(&operation);
    assert_eq!(runtime.block_on(runtime.spawn(operation)).unwrap().unwrap(), 1, "the retry's answer");

    // An operation that fails every attempt, its error sent on boxed from a spawned task.
    let failing = async move {
        let result = dependency.execute(&policy, context, |_| async { Err::<u32, _>(Refused) }).await;
        result.map_err(|e| -> Box<dyn StdError + Send + Sync> { Box::new(e) })
    };
    let error = runtime.block_on(runtime.spawn(failing)).unwrap().unwrap_err();
    assert!(error.to_string().contains("attempts_exhausted"), "{error}");
}

/// A hedged operation spawns too: its two loops share their plan and ids through a lock and atomics,
/// not cells, so its future is `Send` as `execute`'s is. The first copy hangs, the hedge answers.
#[test]
fn a_hedged_operation_spawns_on_the_multi_threaded_runtime() {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 5).unwrap());
    let dependency = Dependency::with_seed("payrail", config, 1).unwrap();
    let policy =
        RetryPolicy::exponential(3, Duration::from_millis(1), Duration::from_millis(2)).build().unwrap();
    let context =
        Context::new(Duration::from_secs(5), ReplaySafety::replayable_read(Duration::from_secs(60)));
    let hedged = async move {
        let after = std::time::Duration::from_millis(5);
        dependency
            .execute_hedged(&policy, context, after, |attempt| async move {
                if attempt.number() == 1 {
                    std::future::pending::<()>().await;
                }
                Ok::<_, Refused>(attempt.number())
            })
            .await
    };
    send(&hedged);
    assert_eq!(runtime.block_on(runtime.spawn(hedged)).unwrap().unwrap(), 2, "the hedge's answer");
}
