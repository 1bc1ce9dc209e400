//! The HTTP layers: relent-tokio's `RetryLayer` beside tower's `Retry` with the HTTP policy a
//! tower user writes (retry 429 and 503 and transport errors while a `TpsBudget` allows, clone the
//! request for each attempt), without and with a `Timeout` layer, over one in-process HTTP service.
//!
//! `execute`'s comparisons ([`crate::contenders`]) time the pipeline around a bare future. What a
//! service calling a payment provider through hyper adds is HTTP's own work around it, and both
//! layers do their share of it: the request's copy for a retry, the response's classification,
//! and, in relent's, the report in the response's extensions and the boxed future (four
//! allocations a request, `std-adapter/tests/alloc.rs`).
//!
//! The request is what such a service sends: a POST with an `Idempotency-Key`, a JSON content
//! type and a 64-byte JSON body, built for each operation by every contender, the bare call
//! included. The service answers 200 at once, or after yielding once (`Path::waits`).

use std::cell::Cell;
use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration as Std, Instant};

use http::{Request, Response, StatusCode};
use relent_core::{DependencyConfig, RetryBudget, RetryPolicy};
use relent_tokio::{Duration, HZ, RetryLayer};
use tower::retry::budget::{Budget, TpsBudget};
use tower::{Layer, Service, ServiceExt};

use crate::contenders::{Path, find_bench};
use crate::paired::{self, Timed};

thread_local! {
    /// Requests the provider answered on this thread, for `Layers::check`.
    static ANSWERED: Cell<u32> = const { Cell::new(0) };
}

/// The in-process provider: answers every request 200 with an empty body, at its first poll or
/// after yielding once.
#[derive(Clone, Copy, Debug)]
pub struct Provider {
    waits: bool,
}

impl Service<Request<String>> for Provider {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = Answer;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<String>) -> Answer {
        ANSWERED.with(|n| n.set(n.get().wrapping_add(1)));
        black_box(request);
        Answer { yields: self.waits }
    }
}

/// The provider's answer: pending once if it `yields`, as a call that waits for the network is.
#[derive(Debug)]
pub struct Answer {
    yields: bool,
}

impl Future for Answer {
    type Output = Result<Response<String>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if std::mem::take(&mut self.yields) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        Poll::Ready(Ok(Response::new(String::new())))
    }
}

/// The request every contender sends: a keyed POST with a JSON body.
fn charge() -> Request<String> {
    Request::post(http::Uri::from_static("http://payrail.test/v1/charges"))
        .header(http::header::CONTENT_TYPE, "application/json")
        .header(relent_tokio::http::IDEMPOTENCY_KEY, "order-4711-charge")
        .body(String::from(r#"{"amount":1250,"currency":"EUR","source":"tok_4242424242424242"}"#))
        .expect("a valid request")
}

/// tower's HTTP retry policy: up to two retries of a 429, a 503 or a transport error, 100 ms
/// apart, each only if the budget allows; every other response deposits in the budget.
#[derive(Clone)]
pub struct HttpPolicy {
    budget: Arc<TpsBudget>,
    retries: u8,
}

impl<E> tower::retry::Policy<Request<String>, Response<String>, E> for HttpPolicy {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _req: &mut Request<String>,
        result: &mut Result<Response<String>, E>,
    ) -> Option<Self::Future> {
        let failed = match result {
            Ok(response) => {
                matches!(response.status(), StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE)
            }
            Err(_) => true,
        };
        if !failed {
            self.budget.deposit();
            return None;
        }
        if self.retries == 0 || !self.budget.withdraw() {
            return None;
        }
        self.retries -= 1;
        Some(tokio::time::sleep(Std::from_millis(100)))
    }

    /// The request's parts and body copied, as relent's layer copies them.
    fn clone_request(&mut self, req: &Request<String>) -> Option<Request<String>> {
        let mut copy = Request::new(req.body().clone());
        *copy.method_mut() = req.method().clone();
        *copy.uri_mut() = req.uri().clone();
        *copy.version_mut() = req.version();
        *copy.headers_mut() = req.headers().clone();
        *copy.extensions_mut() = req.extensions().clone();
        Some(copy)
    }
}

/// The contenders of the HTTP comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerContender {
    /// The provider called directly: the baseline.
    BareService,
    /// relent-tokio's `RetryLayer`.
    RelentLayer,
    /// tower's `Retry` with [`HttpPolicy`].
    TowerRetryWithBudget,
    /// The same over a `Timeout` layer, like for like with relent's attempt timeout.
    TowerRetryWithBudgetAndAttemptTimeout,
}

impl LayerContender {
    /// Every contender, in declaration order: a contender's index is its discriminant.
    pub const ALL: [Self; 4] = [
        Self::BareService,
        Self::RelentLayer,
        Self::TowerRetryWithBudget,
        Self::TowerRetryWithBudgetAndAttemptTimeout,
    ];

    /// Its name in the bench's output.
    pub fn name(self) -> &'static str {
        match self {
            Self::BareService => "bare_service",
            Self::RelentLayer => "relent_layer",
            Self::TowerRetryWithBudget => "tower_retry_with_budget",
            Self::TowerRetryWithBudgetAndAttemptTimeout => "tower_retry_with_budget_and_attempt_timeout",
        }
    }
}

/// The layers over the provider on one runtime, each made once, as a service makes its client
/// once: relent's with a ratio budget (10 %, 5 a window), tower's with a `TpsBudget`, both with 3
/// attempts 100 ms apart and a 3 s attempt timeout (relent's, and tower's `Timeout`).
pub struct Layers {
    rt: tokio::runtime::Runtime,
    /// relent's layer over the provider that answers at once, and over the one that yields first:
    /// one layer, so one dependency, for both.
    relent: [relent_tokio::Retry<Provider>; 2],
    budget: Arc<TpsBudget>,
}

impl Layers {
    /// The layers on `rt`, a current-thread runtime with time enabled.
    pub fn new(rt: tokio::runtime::Runtime) -> Self {
        let budget = RetryBudget::ratio(10, 5).expect("a valid ratio budget");
        let config = DependencyConfig::new(Duration::from_secs(10)).budget(budget);
        let dep = rt.block_on(async { relent_tokio::Dependency::with_seed("payrail", config, 1) });
        let policy: RetryPolicy<HZ> =
            RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
                .attempt_timeout(Duration::from_secs(3))
                .build()
                .expect("a valid policy");
        let layer = RetryLayer::new(dep.expect("a valid dependency"), policy, Std::from_secs(10));
        let relent = [false, true].map(|waits| layer.layer(Provider { waits }));
        let budget = Arc::new(TpsBudget::new(Std::from_secs(10), 5, 0.1));
        Self { rt, relent, budget }
    }

    /// Runs one operation of `who` on `path` to its end, and says whether it got a 200.
    pub fn run(&self, who: LayerContender, path: Path) -> bool {
        let provider = Provider { waits: path.waits };
        let policy = HttpPolicy { budget: self.budget.clone(), retries: 2 };
        let status = match who {
            LayerContender::BareService => {
                self.rt.block_on(provider.oneshot(charge())).map(|r| r.status()).ok()
            }
            LayerContender::RelentLayer => {
                // A clone, as tower's `Retry` is made, for each request: the layer's shared part is
                // behind an `Arc`, as tower's budget is.
                let svc = self.relent[usize::from(path.waits)].clone();
                self.rt.block_on(svc.oneshot(charge())).map(|r| r.status()).ok()
            }
            LayerContender::TowerRetryWithBudget => {
                let svc = tower::retry::Retry::new(policy, provider);
                self.rt.block_on(svc.oneshot(charge())).map(|r| r.status()).ok()
            }
            LayerContender::TowerRetryWithBudgetAndAttemptTimeout => {
                let svc = tower::retry::Retry::new(
                    policy,
                    tower::timeout::Timeout::new(provider, Std::from_secs(3)),
                );
                self.rt.block_on(svc.oneshot(charge())).map(|r| r.status()).ok()
            }
        };
        black_box(status) == Some(StatusCode::OK)
    }

    /// Before anything is timed: each contender, on each of `paths`, gets its 200 from exactly one
    /// request to the provider.
    pub fn check(&self, paths: &[Path]) {
        for &path in paths {
            for who in LayerContender::ALL {
                ANSWERED.set(0);
                let ok = self.run(who, path);
                let answered = ANSWERED.get();
                assert!(
                    ok && answered == 1,
                    "{} on {}: ok {ok} after {answered} requests",
                    who.name(),
                    path.name
                );
            }
        }
    }
}

/// The paired mode over the layers on each of `paths`: every contender's overhead over the bare
/// service of the same round (medians), and relent's layer over tower's, without and with
/// `Timeout`.
pub fn compare(layers: &Layers, paths: &[Path]) {
    layers.check(paths);
    let names = LayerContender::ALL.map(LayerContender::name);
    let ratios =
        [LayerContender::TowerRetryWithBudget, LayerContender::TowerRetryWithBudgetAndAttemptTimeout]
            .map(|other| (LayerContender::RelentLayer as usize, other as usize));
    for &path in paths {
        let t = paired::rotate(LayerContender::ALL.len(), |i| {
            let started = Instant::now();
            for _ in 0..paired::BATCH {
                layers.run(LayerContender::ALL[i], path);
            }
            Timed { took: started.elapsed(), calls: paired::BATCH }
        });
        for line in paired::comparison_lines(&format!("http {}", path.name), &names, &t, &ratios) {
            println!("{line}");
        }
    }
}

/// The count mode's HTTP half: runs `what` (`http/PATH/CONTENDER`, with `PATH` one of `paths`)
/// `n` times on `layers` and nothing else, for callgrind. A `what` that names no such bench is
/// refused with the names it takes.
pub fn count(layers: &Layers, paths: &[Path], what: &str, n: u64) -> Result<(), String> {
    let (path, who) =
        find_bench(what, "http/", "an HTTP bench", paths, &LayerContender::ALL, LayerContender::name)?;
    for _ in 0..n {
        black_box(layers.run(who, path));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tower::retry::Policy;

    use super::*;
    use crate::PATHS_ON_THE_REAL_CLOCK;

    /// `check` panics, naming the contender, unless each gets its 200 from one request; and
    /// relent's layer sends them through one dependency, whichever provider it wraps.
    #[test]
    fn every_layer_gets_its_200_from_one_request_on_both_paths_through_one_dependency() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let layers = Layers::new(rt);
        layers.check(&PATHS_ON_THE_REAL_CLOCK);
        ANSWERED.set(0);
        assert!(layers.run(LayerContender::RelentLayer, PATHS_ON_THE_REAL_CLOCK[1]));
        assert_eq!(ANSWERED.get(), 1);
        // 2 from `check`, 1 here: the dependency's window counted all three.
        let svc = layers.relent[1].clone();
        let report = layers.rt.block_on(svc.oneshot(charge())).unwrap();
        let report = report.extensions().get::<relent_tokio::RetryReport>().copied().unwrap();
        assert_eq!(report.operation, 4, "the fourth operation of the one dependency");
        assert_eq!(report.replay_safety.as_str(), "provider_idempotent_mutation", "a keyed POST");
    }

    /// The count mode runs the named contender `n` times and nothing else, and refuses a name it
    /// does not know, with the names it takes.
    #[test]
    fn count_runs_only_the_named_http_bench() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let layers = Layers::new(rt);
        ANSWERED.set(0);
        assert_eq!(count(&layers, &PATHS_ON_THE_REAL_CLOCK, "http/success/relent_layer", 3), Ok(()));
        assert_eq!(ANSWERED.get(), 3);
        let svc = layers.relent[0].clone();
        let report = layers.rt.block_on(svc.oneshot(charge())).unwrap();
        let report = report.extensions().get::<relent_tokio::RetryReport>().copied().unwrap();
        assert_eq!(report.operation, 4, "the three counted went through relent's layer");
        ANSWERED.set(0);
        assert_eq!(
            count(&layers, &PATHS_ON_THE_REAL_CLOCK, "success/relent_layer", 1),
            Err("--count success/relent_layer: not an HTTP bench this mode runs. It takes \
                 http/PATH/CONTENDER with PATH one of success, success_after_a_wait and CONTENDER one \
                 of bare_service, relent_layer, tower_retry_with_budget, \
                 tower_retry_with_budget_and_attempt_timeout"
                .to_string())
        );
        assert!(count(&layers, &PATHS_ON_THE_REAL_CLOCK, "http/one_retry/relent_layer", 1).is_err());
        assert_eq!(ANSWERED.get(), 0, "a refused count calls nothing");
    }

    /// The provider's answer is pending once, and wakes its task, when it waits; ready at once
    /// when it does not.
    #[test]
    fn the_provider_answers_200_after_yielding_once_if_it_waits() {
        let waker = std::task::Waker::noop();
        let mut cx = Context::from_waker(waker);
        for (waits, pending) in [(false, 0), (true, 1)] {
            let mut answer = Provider { waits }.call(charge());
            let mut polls = 0;
            let response = loop {
                match Pin::new(&mut answer).poll(&mut cx) {
                    Poll::Ready(r) => break r.unwrap(),
                    Poll::Pending => polls += 1,
                }
            };
            assert_eq!((polls, response.status()), (pending, StatusCode::OK));
        }
    }

    /// tower's policy retries a 429, a 503 or an error, at most twice and only with budget, and
    /// deposits for any other response; its copy of the request is the request's every part.
    #[test]
    fn towers_http_policy_retries_twice_with_budget_and_copies_the_whole_request() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let _timers = rt.enter();
        let status = |code: u16| -> Result<Response<String>, ()> {
            Ok(Response::builder().status(code).body(String::new()).unwrap())
        };
        let mut req = charge();
        let with = |min_per_sec| HttpPolicy {
            budget: Arc::new(TpsBudget::new(Std::from_secs(10), min_per_sec, 0.0)),
            retries: 2,
        };
        let mut policy = with(10);
        let retried = |policy: &mut HttpPolicy, result: &mut Result<Response<String>, ()>| {
            policy.retry(&mut charge(), result).is_some()
        };
        assert!(retried(&mut policy, &mut status(503)));
        assert!(retried(&mut policy, &mut Err(())));
        assert!(!retried(&mut policy, &mut status(429)), "a third retry");
        assert!(retried(&mut with(10), &mut status(429)));
        assert!(!retried(&mut with(10), &mut status(500)), "a 500 is not retried");
        assert!(!retried(&mut with(10), &mut status(200)));
        assert!(!retried(&mut with(0), &mut status(503)), "no retry without budget");

        req.extensions_mut().insert(7u32);
        let copy = Policy::<_, Response<String>, ()>::clone_request(&mut with(0), &req).unwrap();
        assert_eq!(
            (copy.method(), copy.uri(), copy.version(), copy.headers(), copy.body()),
            (req.method(), req.uri(), req.version(), req.headers(), req.body())
        );
        assert_eq!(copy.headers().len(), 2);
        assert_eq!(copy.extensions().get::<u32>(), Some(&7));
    }
}
