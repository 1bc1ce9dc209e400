//! The contenders and the paths they run: who calls the same future, and how that call behaves.

use std::cell::Cell;
use std::hint::black_box;
use std::time::{Duration as Std, Instant};

use backon::ExponentialBuilder;
use relent_core::{Context, ReplaySafety, RetryBudget, RetryPolicy, Verdict};
use relent_tokio::{Duration, HZ};
use tower::retry::budget::{Budget, TpsBudget};

/// Every adapter bench's operation: a 10 s deadline, replayable for an hour. relent-tests' core
/// benches take it too: their ticks are relent-tokio's.
pub const CONTEXT: Context<HZ> =
    Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));

/// The failure of `call`: retryable.
#[derive(Debug)]
pub struct Refused;

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("refused")
    }
}

impl std::error::Error for Refused {}

impl relent_core::Classify<HZ> for Refused {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

thread_local! {
    /// Calls made by `call` on this thread, for `Adapters::check`. The thread's own, so that the
    /// threads of the contended mode share no counter of the bench's: only what the contenders
    /// share moves between their caches. A plain load and store every contender pays alike.
    static CALLS: Cell<u32> = const { Cell::new(0) };
}

async fn call(fail: bool, waits: bool) -> Result<u32, Refused> {
    CALLS.with(|calls| calls.set(calls.get().wrapping_add(1)));
    if waits {
        tokio::task::yield_now().await;
    }
    if black_box(fail) { Err(Refused) } else { Ok(7) }
}

/// What the attempts of an adapter bench do.
#[derive(Debug, Clone, Copy)]
pub struct Path {
    /// The path's name in the benches' output, and in `--count PATH/CONTENDER`.
    pub name: &'static str,
    /// The first attempt fails, and the retry succeeds after a 100 ms backoff.
    pub fails_first: bool,
    /// Each attempt is pending at its first poll (it yields once), as a call that waits for the
    /// network is: an attempt timeout then arms its timer. Without it, an attempt is ready at once.
    pub waits: bool,
}

/// The three paths: the first two never sleep, so they run on the real clock as well.
pub const PATHS: [Path; 3] = [
    Path { name: "success", fails_first: false, waits: false },
    Path { name: "success_after_a_wait", fails_first: false, waits: true },
    Path { name: "one_retry", fails_first: true, waits: false },
];

/// The paths that never sleep, which the benches on the real clock run: an attempt ready at once,
/// and one that yields once. (The retry path's 100 ms backoff needs the paused clock.)
pub const PATHS_ON_THE_REAL_CLOCK: [Path; 2] = [PATHS[0], PATHS[1]];

/// tower's request in the adapter benches: whether the call fails. A plain value, so that tower's
/// figures hold no allocation of the bench's own (an earlier `Arc` counter cost tower about 140
/// instructions per operation that were not tower's).
#[derive(Debug, Clone, Copy)]
struct Fails(bool);

/// tower's retry policy with a budget: one retry after 100 ms, if the budget allows.
#[derive(Clone)]
struct TowerPolicy {
    budget: std::sync::Arc<TpsBudget>,
    retried: bool,
}

impl<Res, E> tower::retry::Policy<Fails, Res, E> for TowerPolicy {
    type Future = tokio::time::Sleep;

    fn retry(&mut self, req: &mut Fails, result: &mut Result<Res, E>) -> Option<Self::Future> {
        match result {
            Ok(_) => {
                self.budget.deposit();
                None
            }
            Err(_) if !self.retried && self.budget.withdraw() => {
                self.retried = true;
                // The retry is the request's second call, which succeeds.
                *req = Fails(false);
                Some(tokio::time::sleep(Std::from_millis(100)))
            }
            Err(_) => None,
        }
    }

    fn clone_request(&mut self, req: &Fails) -> Option<Fails> {
        Some(*req)
    }
}

/// Who runs the operations of the adapter benches (`Adapters::run` runs one, on a `Path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contender {
    /// The future awaited directly: the baseline every overhead is taken over.
    BareCall,
    /// relent-tokio's `Dependency::execute`, with a ratio budget.
    RelentTokio,
    /// backon's `Retryable::retry` with tokio's sleep.
    Backon,
    /// tower's `Retry` with a `TpsBudget` policy.
    TowerRetryWithBudget,
    /// backon, each attempt under `tokio::time::timeout`.
    BackonWithAttemptTimeout,
    /// tower's `Retry` over a `Timeout` layer.
    TowerRetryWithBudgetAndAttemptTimeout,
}

impl Contender {
    /// Every contender, in declaration order: a contender's index is its discriminant.
    pub const ALL: [Self; 6] = [
        Self::BareCall,
        Self::RelentTokio,
        Self::Backon,
        Self::TowerRetryWithBudget,
        Self::BackonWithAttemptTimeout,
        Self::TowerRetryWithBudgetAndAttemptTimeout,
    ];

    /// Its name in the benches' output, and in `--count PATH/CONTENDER`.
    pub fn name(self) -> &'static str {
        match self {
            Self::BareCall => "bare_call",
            Self::RelentTokio => "relent_tokio",
            Self::Backon => "backon",
            Self::TowerRetryWithBudget => "tower_retry_with_budget",
            // Like for like with relent-tokio, which always enforces a per-attempt timeout: the
            // same two, each attempt under a 3 s timeout.
            Self::BackonWithAttemptTimeout => "backon_with_attempt_timeout",
            Self::TowerRetryWithBudgetAndAttemptTimeout => "tower_retry_with_budget_and_attempt_timeout",
        }
    }
}

/// `$then` applied to one operation of `$who` on `$path` (a future, bound to `$op`), every
/// contender's operation defined here once: `Adapters::run` hands it to its runtime's `block_on`,
/// and the multi-threaded mode awaits it in a task. The results are black-boxed by `$then` before
/// they are inspected, so no contender's value is folded away.
macro_rules! with_operation {
    ($shared:expr, $who:expr, $path:expr, |$op:ident| $then:expr) => {{
        use backon::Retryable;
        use tower::{Service, ServiceExt};

        let Path { fails_first, waits, .. } = $path;
        let backoff = ExponentialBuilder::default()
            .with_min_delay(Std::from_millis(100))
            .with_max_times(2)
            .with_jitter();
        // The request says whether its call fails; tower's policy clears it for the retry.
        let service = tower::service_fn(|Fails(fail)| call(fail, waits));
        let Shared { dep, policy: relent_policy, tower_budget } = $shared;
        let policy = || TowerPolicy { budget: tower_budget.clone(), retried: false };
        match $who {
            Contender::BareCall => {
                let $op = call(false, waits);
                $then
            }
            Contender::RelentTokio => {
                let $op = dep
                    .execute(relent_policy, CONTEXT, |info| call(fails_first && info.number() == 1, waits));
                $then
            }
            Contender::Backon => {
                let $op = async {
                    let mut first = fails_first;
                    (|| call(std::mem::replace(&mut first, false), waits))
                        .retry(backoff)
                        .sleep(tokio::time::sleep)
                        .await
                };
                $then
            }
            Contender::TowerRetryWithBudget => {
                let $op = async {
                    let mut svc = tower::retry::Retry::new(policy(), service);
                    svc.ready().await.map_err(|_| ()).unwrap().call(Fails(fails_first)).await
                };
                $then
            }
            Contender::BackonWithAttemptTimeout => {
                let $op = async {
                    let mut first = fails_first;
                    (|| {
                        let fail = std::mem::replace(&mut first, false);
                        async move {
                            tokio::time::timeout(Std::from_secs(3), call(fail, waits))
                                .await
                                .map_err(|_| Refused)?
                        }
                    })
                    .retry(backoff)
                    .sleep(tokio::time::sleep)
                    .await
                };
                $then
            }
            Contender::TowerRetryWithBudgetAndAttemptTimeout => {
                let $op = async {
                    let timed = tower::timeout::Timeout::new(service, Std::from_secs(3));
                    let mut svc = tower::retry::Retry::new(policy(), timed);
                    svc.ready().await.map_err(|_| ()).unwrap().call(Fails(fails_first)).await.map_err(|_| ())
                };
                $then
            }
        }
    }};
}

/// What the contenders' operations share: relent-tokio's dependency and policy with a ratio
/// budget, and tower's budget. One of each, however many threads call them, as in a service.
struct Shared {
    dep: relent_tokio::Dependency,
    policy: RetryPolicy<HZ>,
    tower_budget: std::sync::Arc<TpsBudget>,
}

/// What the adapter benches run on: a tokio runtime, and the state the contenders share (see
/// [`Adapters::sharing`]).
pub struct Adapters {
    rt: tokio::runtime::Runtime,
    shared: std::sync::Arc<Shared>,
}

impl Adapters {
    /// The contenders on `rt`, a runtime with time enabled: current-thread (paused or not) or,
    /// with this crate's `multi-thread` feature, multi-threaded.
    pub fn new(rt: tokio::runtime::Runtime) -> Self {
        let budget = RetryBudget::ratio(100, 0).expect("a valid ratio budget");
        let config = relent_core::DependencyConfig::new(Duration::from_secs(10)).budget(budget);
        let dep = rt.block_on(async { relent_tokio::Dependency::with_seed("bench", config, 1) });
        let dep = dep.expect("a valid dependency");
        // 3 attempts, 100 ms doubling to 2 s, each under a 3 s timeout.
        let policy = RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
            .attempt_timeout(Duration::from_secs(3))
            .build()
            .expect("a valid policy");
        let tower_budget = std::sync::Arc::new(TpsBudget::new(Std::from_secs(10), 1_000_000, 1.0));
        Self { rt, shared: std::sync::Arc::new(Shared { dep, policy, tower_budget }) }
    }

    /// The same contenders on another runtime `rt`, sharing this one's dependency, policy and
    /// tower's budget: for another thread, as a service's threads share one dependency (see
    /// `paired::contended`).
    #[must_use = "this returns the contenders for another thread"]
    pub fn sharing(&self, rt: tokio::runtime::Runtime) -> Self {
        Self { rt, shared: self.shared.clone() }
    }

    /// Runs one operation of `who` to its end on this runtime (its `block_on`), and says whether
    /// it succeeded.
    pub fn run(&self, who: Contender, path: Path) -> bool {
        let rt = &self.rt;
        with_operation!(&*self.shared, who, path, |op| black_box(rt.block_on(op)).is_ok())
    }

    /// Spawns a task on this runtime that runs `n` operations of `who` on `path` one after the
    /// other, and gives back the instants its first began and its last ended, and its calls.
    pub fn spawn(
        &self,
        who: Contender,
        path: Path,
        n: usize,
    ) -> tokio::task::JoinHandle<crate::paired::Span> {
        let shared = self.shared.clone();
        self.rt.spawn(async move {
            let shared = &*shared;
            let began = Instant::now();
            for _ in 0..n {
                with_operation!(shared, who, path, |op| black_box(op.await).is_ok());
            }
            crate::paired::Span { began, ended: Instant::now(), calls: n }
        })
    }

    /// Runs `future` to its end on this runtime, from the calling thread.
    pub fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.rt.block_on(future)
    }

    /// Before anything is timed: each contender, on each of `paths`, succeeds after exactly the
    /// path's calls (one, or two for `one_retry`; the bare call always makes one), so every figure
    /// measures the same work.
    pub fn check(&self, paths: &[Path]) {
        for &path in paths {
            for who in Contender::ALL {
                CALLS.set(0);
                let ok = self.run(who, path);
                let expected = if path.fails_first && who != Contender::BareCall { 2 } else { 1 };
                let calls = CALLS.get();
                assert!(
                    ok && calls == expected,
                    "{} on {}: succeeded {ok} after {calls} calls, expected success after {expected}",
                    who.name(),
                    path.name
                );
            }
        }
    }
}

/// The count mode's adapter half: runs `what` (`PATH/CONTENDER`, as the benches name them, with
/// `PATH` one of `paths`) `n` times on `adapters` and nothing else, so that callgrind counts its
/// instructions without a bench loop around them. A `what` that names no such bench is refused
/// with the names it takes.
pub fn count(adapters: &Adapters, paths: &[Path], what: &str, n: u64) -> Result<(), String> {
    let (path, who) = find_bench(what, "", "a bench", paths, &Contender::ALL, Contender::name)?;
    for _ in 0..n {
        black_box(adapters.run(who, path));
    }
    Ok(())
}

/// The path and contender that `what` names as `{prefix}PATH/CONTENDER`, with `PATH` one of `paths`
/// and `CONTENDER` one of `all` (by `name`); or the message that refuses it, with the names it
/// takes. The count modes' one parser.
pub(crate) fn find_bench<C: Copy>(
    what: &str,
    prefix: &str,
    kind: &str,
    paths: &[Path],
    all: &[C],
    name: impl Fn(C) -> &'static str,
) -> Result<(Path, C), String> {
    let found = what.strip_prefix(prefix).and_then(|rest| rest.split_once('/')).and_then(|(path, who)| {
        let path = paths.iter().find(|p| p.name == path)?;
        let who = all.iter().copied().find(|&c| name(c) == who)?;
        Some((*path, who))
    });
    found.ok_or_else(|| {
        let paths: Vec<&str> = paths.iter().map(|p| p.name).collect();
        let contenders: Vec<&str> = all.iter().map(|&c| name(c)).collect();
        format!(
            "--count {what}: not {kind} this mode runs. It takes {prefix}PATH/CONTENDER with PATH one of {} \
             and CONTENDER one of {}",
            paths.join(", "),
            contenders.join(", ")
        )
    })
}

#[cfg(test)]
impl Adapters {
    /// For tests: the adapters on a current-thread runtime on the real clock.
    pub(crate) fn on_the_real_clock() -> Self {
        Self::new(tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap())
    }

    /// For tests: the calls relent-tokio's contender has made through the shared dependency (in
    /// its window of 10 s).
    pub(crate) fn relent_calls(&self) -> u32 {
        self.shared.dep.inspect(|state, _, now| state.counts(now).calls)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The contended mode measures a shared dependency only if each thread's adapters share it.
    #[test]
    fn adapters_made_by_sharing_call_the_same_dependency_and_tower_budget() {
        let first = Adapters::on_the_real_clock();
        let other =
            first.sharing(tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap());
        assert!(other.run(Contender::RelentTokio, PATHS[0]) && other.run(Contender::RelentTokio, PATHS[0]));
        assert_eq!(first.relent_calls(), 2);
        assert!(std::sync::Arc::ptr_eq(&first.shared.tower_budget, &other.shared.tower_budget));
    }

    /// The multi-threaded mode's tasks: each runs its `n` operations through the shared dependency
    /// and spans them. (On a current-thread runtime here, whose tasks run on the thread that
    /// blocks on them: the test builds without the `multi-thread` feature.)
    #[test]
    fn a_spawned_task_runs_its_operations_through_the_shared_dependency_and_spans_them() {
        let adapters = Adapters::on_the_real_clock();
        CALLS.set(0);
        let before = std::time::Instant::now();
        let handle = adapters.spawn(Contender::RelentTokio, PATHS[1], 3);
        let span = adapters.block_on(handle).unwrap();
        assert!(before <= span.began && span.began <= span.ended && span.ended <= std::time::Instant::now());
        assert_eq!((span.calls, CALLS.get()), (3, 3), "the calls the span counts are the calls made");
        assert_eq!(adapters.relent_calls(), 3);
    }

    // `CALLS` is the test thread's own: the tests running beside this one do not move it.
    #[test]
    fn on_the_real_clock_every_contender_succeeds_after_one_call_and_count_runs_only_named_benches() {
        let adapters = Adapters::on_the_real_clock();
        // `check` panics, naming the contender, on any other outcome.
        adapters.check(&PATHS[..2]);
        let relent_calls = || adapters.relent_calls();
        assert_eq!(relent_calls(), 2, "check ran relent-tokio once on each path");
        CALLS.set(0);
        assert_eq!(count(&adapters, &PATHS[..2], "success_after_a_wait/tower_retry_with_budget", 3), Ok(()));
        assert_eq!(CALLS.get(), 3);
        assert_eq!(count(&adapters, &PATHS[..2], "success/relent_tokio", 2), Ok(()));
        assert_eq!(relent_calls(), 4, "the contender named, and no other");
        CALLS.set(0);
        let refused = count(&adapters, &PATHS[..2], "one_retry/relent_tokio", 1).unwrap_err();
        assert_eq!(
            refused,
            "--count one_retry/relent_tokio: not a bench this mode runs. It takes PATH/CONTENDER with \
             PATH one of success, success_after_a_wait and CONTENDER one of bare_call, relent_tokio, \
             backon, tower_retry_with_budget, backon_with_attempt_timeout, \
             tower_retry_with_budget_and_attempt_timeout"
        );
        assert!(count(&adapters, &PATHS, "success", 1).is_err(), "a path without a contender");
        assert_eq!(CALLS.get(), 0, "a refused count calls nothing");
    }

    /// The retry path, on the real clock (each contender's 100 ms backoff is slept): `check` finds
    /// that every contender but the bare call succeeds after exactly two calls.
    #[test]
    fn on_the_retry_path_every_contender_but_the_bare_call_retries_once_and_succeeds() {
        let adapters = Adapters::on_the_real_clock();
        adapters.check(&PATHS[2..]);
        assert_eq!(adapters.relent_calls(), 2);
    }

    /// tower's contenders retry through this policy: once, after a failure, and only if the budget
    /// allows; the retry's request is one that succeeds.
    #[test]
    fn towers_policy_retries_a_failure_once_and_only_with_budget() {
        use tower::retry::Policy;
        fn retry(policy: &mut TowerPolicy, req: &mut Fails) -> bool {
            Policy::<Fails, (), ()>::retry(policy, req, &mut Err(())).is_some()
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        let _timers = rt.enter();
        let with = |min_per_sec| TowerPolicy {
            budget: std::sync::Arc::new(TpsBudget::new(Std::from_secs(10), min_per_sec, 0.0)),
            retried: false,
        };
        let mut policy = with(10);
        let mut req = Fails(true);
        assert!(retry(&mut policy, &mut req), "the first failure is retried");
        assert!(!req.0, "as a request that succeeds");
        assert!(!retry(&mut policy, &mut Fails(true)), "a second failure is not");
        assert_eq!(
            Policy::<Fails, (), ()>::clone_request(&mut policy, &Fails(true)).map(|r| r.0),
            Some(true)
        );
        assert!(!retry(&mut with(0), &mut Fails(true)), "no retry without budget");
        assert_eq!(Refused.to_string(), "refused");
    }
}
