//! An operation whose own future does not allocate goes through `execute`, with a retry and its
//! backoff sleep, without a single heap allocation, the very first one included: the state lives in
//! the dependency, allocated once when it is built (its name and its shared state: two
//! allocations, 920 bytes), and in the operation's own future. tokio's timer and a `tracing` call
//! with no subscriber allocate nothing either.
//!
//! Counted with `allocation-counter`, on the test's own thread, around a current-thread runtime
//! with paused time.

use relent_tokio::core::{
    Classify, Context, DependencyConfig, ReplaySafety, RetryBudget, RetryPolicy, Verdict,
};
use relent_tokio::{Dependency, Duration, HZ};

#[derive(Debug)]
struct Refused;

impl Classify<HZ> for Refused {
    fn classify(&self) -> Verdict<HZ> {
        Verdict::Retryable
    }
}

const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .attempt_timeout(Duration::from_secs(3))
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

#[test]
fn execute_with_a_retry_does_not_allocate() {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let mut dep = None;
    let building = allocation_counter::measure(|| {
        dep = Some(runtime.block_on(async { Dependency::with_seed("payrail", config, 1).unwrap() }));
    });
    assert_eq!(building.count_total, 2, "building a dependency: its name and its shared state");
    // The shared state with its `Arc`'s counts: 1,408 bytes, the lock and the state it guards on
    // 128-byte lines of their own (728 before those, 896 before the window counted the client
    // throttle's refusals, 1,024 before the adaptive limit's 16 bytes of state and 24 of
    // configuration, 1,152 before the latency log's 248 and 8); the name, "payrail" after an
    // `Arc`'s counts, to a multiple of 8: 24.
    assert_eq!(building.bytes_total, 1_408 + 24, "{building:?}");
    let dep = dep.unwrap();
    let context =
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));
    let one = || async {
        dep.execute(&POLICY, context, |info| async move {
            if info.number() == 1 { Err(Refused) } else { Ok(7u32) }
        })
        .await
    };
    let mut total = 0;
    let counted = allocation_counter::measure(|| {
        runtime.block_on(async {
            for _ in 0..100 {
                total += one().await.unwrap();
            }
        })
    });
    assert_eq!(total, 700);
    // The counter does count: one box is one allocation.
    let control = allocation_counter::measure(|| drop(std::hint::black_box(Box::new(1u64))));
    assert_eq!(control.count_total, 1);
    assert_eq!(counted.count_total, 0, "allocations in 100 operations with a retry each: {counted:?}");
    assert_eq!(dep.inspect(|s, _, now| s.counts(now)).calls, 200, "each operation really made two attempts");
}

/// A hedged operation allocates nothing either, its hedge included: the two loops, the delay's
/// timer and the answer's race all live in its one future (1,536 bytes here, where `execute`'s
/// with the same attempt is 560).
#[test]
fn execute_hedged_with_a_hedge_does_not_allocate() {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let dep = runtime.block_on(async { Dependency::with_seed("payrail", config, 1).unwrap() });
    let context =
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));
    let after = std::time::Duration::from_millis(50);
    let attempt = |info: relent_tokio::AttemptInfo| async move {
        let ms = if info.number() == 1 { 300 } else { 10 };
        tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
        Ok::<u32, Refused>(u32::from(info.number()))
    };
    let mut total = 0;
    let counted = allocation_counter::measure(|| {
        runtime.block_on(async {
            for _ in 0..100 {
                total += dep.execute_hedged(&POLICY, context, after, attempt).await.unwrap();
            }
        })
    });
    assert_eq!(total, 200, "the hedge's answer, each time");
    assert_eq!(counted.count_total, 0, "allocations in 100 hedged operations: {counted:?}");
    assert_eq!(dep.inspect(|s, _, now| s.counts(now)).calls, 200, "each operation really was hedged");
    // Each loop as `execute`'s future holds it, the delay's timer, and the operation's outcome kept
    // while its hedge runs; the rest (the plan and the ids the hedge takes, the delay's instant, the
    // arguments, among them the 24-byte `HedgeDelay`, the pinned references, the flags, and the
    // hedge's call wrapped to say it was sent, the context) measures 232 bytes (176 when the delay
    // was a 16-byte `std::time::Duration` and nothing said a hedge was sent, 216 before the
    // context's criticality took it from 40 bytes to 48), and the bound leaves 8 for another
    // compiler's layout. A loop or an operation held twice (144 bytes) fails it.
    type Outcome = Option<Result<relent_tokio::Detailed<u32, Refused>, relent_tokio::core::StartError>>;
    let size = size_of_val(&dep.execute_hedged(&POLICY, context, after, attempt));
    let one = size_of_val(&dep.execute(&POLICY, context, attempt));
    let parts = 2 * one + size_of::<tokio::time::Sleep>() + size_of::<Outcome>();
    assert!(
        size <= parts + 240,
        "execute_hedged's future is {size} bytes, {} more than its parts",
        size - parts
    );
    eprintln!("execute_hedged: {size} bytes, execute: {one}");
}

/// The future of `execute` holds the operation once (an `async fn` taking it as an argument, or one
/// future awaiting another, would hold it twice), beside the context, the operation's timer and the
/// attempt's own future, and not the attempt in flight. The rest (the loop's locals, the pinned
/// references the attempt's race with its timer borrows, the states' tags, and the share of a
/// reconfigured dependency's configuration the operation keeps) measures 119 bytes (95 until the
/// race kept the clock and the expiry apart, for the bound of the operations inside the attempt,
/// and a flag for its timer, in a word of its own; 103 until a wait in the bulkhead's queue held
/// the pointer to its boxed wake-up; 111 until `Dependency::reconfigure`), and the bound leaves 5
/// for another compiler's
/// layout: a borrowed local kept across an await (8 bytes, as a closure's borrow of the start time
/// once did) fails it, as would the attempt in flight (40).
#[test]
fn the_execute_future_holds_the_operation_once() {
    use relent_tokio::AttemptError;
    use relent_tokio::core::Operation;
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let _entered = runtime.enter();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let dep = Dependency::with_seed("payrail", config, 1).unwrap();
    let context =
        Context::new(Duration::from_secs(10), ReplaySafety::replayable_read(Duration::from_secs(3600)));
    let attempt = || async { Ok::<u32, Refused>(7) };
    // The operation's one timer, and the attempt's future beside it.
    let held = size_of::<Operation<'_, HZ, AttemptError<Refused>>>()
        + size_of_val(&context)
        + size_of::<Option<tokio::time::Sleep>>()
        + size_of_val(&attempt());
    for (entry, size) in [
        ("execute", size_of_val(&dep.execute(&POLICY, context, |_| attempt()))),
        ("execute_detailed", size_of_val(&dep.execute_detailed(&POLICY, context, |_| attempt()))),
    ] {
        assert!(size >= held, "{entry}: {size} < {held}: the operation is not in the future?");
        assert!(size <= held + 124, "{entry}'s future is {size} bytes, {} more than it needs", size - held);
        eprintln!("{entry}: {size} bytes, {held} held");
    }
}

/// The tower layer allocates four times a request, retried or not: its boxed future, and the
/// report in the response's extensions (http's map of extensions, the map's table and the report's
/// box). A request with no headers and no extensions here, whose parts copy without allocating.
/// The boxed future holds the request's parts once.
#[test]
fn the_layer_allocates_four_times_a_request_and_its_future_holds_the_request_once() {
    use relent_tokio::RetryLayer;
    use tower::{Layer, Service, ServiceExt};
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let _entered = runtime.enter();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let dep = Dependency::with_seed("payrail", config, 1).unwrap();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    // Every other call answers 503, so a request that starts on one is retried once.
    let counter = calls.clone();
    let inner = tower::service_fn(move |_req: http::Request<()>| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let status = if n % 2 == 0 { 503 } else { 200 };
        async move {
            Ok::<_, std::convert::Infallible>(http::Response::builder().status(status).body(()).unwrap())
        }
    });
    let mut svc = RetryLayer::new(dep, POLICY, std::time::Duration::from_secs(5)).layer(inner);
    let requests: Vec<_> = (0..200)
        .map(|_| http::Request::get(http::Uri::from_static("http://payrail.test/quote")).body(()).unwrap())
        .collect();
    let boxed =
        svc.call(http::Request::get(http::Uri::from_static("http://payrail.test/quote")).body(()).unwrap());
    // 1,280 bytes measured here (1,272 before an operation kept a reconfigured dependency's
    // configuration, 1,264 before the context's criticality, 1,248 before the request's own deadline was passed to its
    // operation, to be applied on the operation's first clock read; 2,136 while the future held the
    // request three times: as the boxed block's capture, as an `async fn`'s argument and in its
    // local). The bound leaves 100 for another compiler's layout; a second copy of the request's
    // parts (224) fails it.
    let parts = size_of::<http::request::Parts>();
    let size = size_of_val(&*boxed);
    assert!(size >= parts, "{size} bytes: the request's parts are not in the future?");
    assert!(size <= 1_280 + 100, "the layer's future is {size} bytes, {} more than measured", size - 1_280);
    eprintln!("the layer's future: {size} bytes");
    drop(boxed);
    let mut statuses = Vec::with_capacity(200);
    let counted = allocation_counter::measure(|| {
        runtime.block_on(async {
            for request in requests {
                let response = svc.ready().await.unwrap().call(request).await.unwrap();
                statuses.push(response.status().as_u16());
            }
        })
    });
    assert!(statuses.iter().all(|&s| s == 200));
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 400, "each request was retried once");
    assert_eq!(counted.count_total, 4 * 200, "{counted:?}");
}

/// A hedged request through the HTTP layer allocates as one that is not: four times (its boxed
/// future and the report in the response's extensions), the hedge's loop and timer living in the
/// boxed future, whose size is printed for docs/memory.md.
#[test]
fn a_hedged_request_through_the_layer_allocates_four_times_too() {
    use relent_tokio::{RetryLayer, RetryReport};
    use tower::{Layer, Service, ServiceExt};
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let _entered = runtime.enter();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let dep = Dependency::with_seed("payrail", config, 1).unwrap();
    // The first copy of each request answers after 300 ms, the hedge after 10.
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let counter = calls.clone();
    let inner = tower::service_fn(move |_req: http::Request<()>| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move {
            let ms = if n % 2 == 0 { 300 } else { 10 };
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok::<_, std::convert::Infallible>(http::Response::new(()))
        }
    });
    let after = std::time::Duration::from_millis(50);
    let mut svc =
        RetryLayer::new(dep, POLICY, std::time::Duration::from_secs(5)).hedge_after(after).layer(inner);
    let quote = || http::Request::get(http::Uri::from_static("http://payrail.test/quote")).body(()).unwrap();
    let requests: Vec<_> = (0..100).map(|_| quote()).collect();
    eprintln!("the hedged layer's future: {} bytes", size_of_val(&*svc.call(quote())));
    let mut hedges = 0;
    let counted = allocation_counter::measure(|| {
        runtime.block_on(async {
            for request in requests {
                let response = svc.ready().await.unwrap().call(request).await.unwrap();
                hedges += u32::from(response.extensions().get::<RetryReport>().unwrap().hedge);
            }
        })
    });
    assert_eq!((hedges, calls.load(std::sync::atomic::Ordering::Relaxed)), (100, 200), "each request hedged");
    assert_eq!(counted.count_total, 4 * 100, "{counted:?}");
}

/// The generic layer allocates once a request, retried or not: its boxed future (a service's
/// requests here carry no extensions for a report, as an HTTP response does). The request is a
/// number, cloned without allocating; the future holds it once.
#[test]
fn the_generic_layer_allocates_once_a_request() {
    use relent_tokio::{PipelineLayer, Plan};
    use tower::{Layer, Service, ServiceExt};

    #[derive(Clone)]
    struct Reads;
    impl Plan<u64, Refused> for Reads {
        fn safety(&self, _: &u64) -> ReplaySafety<HZ> {
            ReplaySafety::replayable_read(Duration::from_secs(3600))
        }
        fn classify(&self, error: &Refused) -> Verdict<HZ> {
            error.classify()
        }
    }

    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
    let _entered = runtime.enter();
    let config = DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(100, 0).unwrap());
    let dep = Dependency::with_seed("store", config, 1).unwrap();
    let calls = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    // Every other call is refused, so a request that starts on one is retried once.
    let counter = calls.clone();
    let inner = tower::service_fn(move |key: u64| {
        let n = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        async move { if n % 2 == 0 { Err(Refused) } else { Ok(key * 2) } }
    });
    let mut svc = PipelineLayer::new(dep, POLICY, std::time::Duration::from_secs(5), Reads).layer(inner);
    let mut total = 0;
    let counted = allocation_counter::measure(|| {
        runtime.block_on(async {
            for key in 0..200 {
                total += svc.ready().await.unwrap().call(key).await.unwrap();
            }
        })
    });
    assert_eq!(total, 2 * (0..200).sum::<u64>());
    assert_eq!(calls.load(std::sync::atomic::Ordering::Relaxed), 400, "each request was retried once");
    assert_eq!(counted.count_total, 200, "{counted:?}");
    let boxed = svc.call(1);
    eprintln!("the generic layer's future: {} bytes", size_of_val(&*boxed));
}

/// A scope holds the handler's future once, in place, beside its deadline: tokio's instant (16
/// bytes) more than the future, however large, and the padding that aligns it. An `async` wrapper
/// would pin it in a local of its own and hold it twice (2,072 bytes for a 1,024-byte future).
#[test]
fn a_scope_holds_the_future_it_bounds_once() {
    let runtime = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let _entered = runtime.enter();
    let handler = || async {
        let buffer = [7u8; 1_000];
        tokio::task::yield_now().await;
        buffer[3]
    };
    let alone = size_of_val(&handler());
    let scoped = relent_tokio::RequestDeadline::within(std::time::Duration::from_secs(1)).scope(handler());
    assert!(alone >= 1_000, "{alone}");
    let most = alone.next_multiple_of(align_of::<tokio::time::Instant>()) + size_of::<tokio::time::Instant>();
    assert!(size_of_val(&scoped) <= most, "{} bytes for a {alone}-byte future", size_of_val(&scoped));
    assert_eq!(runtime.block_on(scoped), 7);
}
