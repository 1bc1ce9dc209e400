//! `relent_tokio::grpc` over gRPC's own wire: tonic's client and server codecs, joined in the
//! process (no sockets), so that every status, its message and its `grpc-retry-pushback-ms` are
//! encoded into HTTP/2 trailers by tonic's server and decoded by tonic's client, as between two
//! services; on tokio's paused clock, so that the transcripts' instants are exact.
#![cfg(feature = "tonic")]

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration as Std;

use relent_tokio::core::{
    BreakerConfig, CircuitState, Context, Disposition, Jitter, Judged, Problem, ReplaySafety, RetryPolicy,
    Verdict,
};
use relent_tokio::grpc::{GrpcClassifier, PUSHBACK, pushback_value, status_for};
use relent_tokio::{Dependency, Duration, Error, HZ};
use support::{Client, Handler, Pricing, Text, Wire, budgeted, pricing, read};
use tokio::time::Instant;
use tonic::{Code, Status};

/// A status as the server sends it, with a pushback.
fn pushed_back(status: Status, value: &str) -> Status {
    let mut status = status;
    status.metadata_mut().insert(PUSHBACK, value.parse().unwrap());
    status
}

const POLICY: RetryPolicy<HZ> =
    match RetryPolicy::exponential(3, Duration::from_millis(100), Duration::from_secs(2))
        .jitter(Jitter::None)
        .build()
    {
        Ok(p) => p,
        Err(e) => panic!("{}", e.message()),
    };

type Answer = Result<Result<tonic::Response<String>, Status>, Error<Judged<HZ, Status>>>;

/// One call of `Quote` through the dependency, judged by `grpc`.
async fn quote(dep: &Dependency, grpc: &GrpcClassifier, client: &Client, deadline: Std) -> Answer {
    dep.execute(&POLICY, read(deadline), |_| {
        let mut client = client.clone();
        async move { grpc.judge(client.quote("sku-7").await) }
    })
    .await
}

#[tokio::test(start_paused = true)]
async fn unavailable_is_retried_after_the_servers_pushback_rather_than_the_backoff() {
    let server = Pricing::new([
        Err(pushed_back(Status::unavailable("draining"), "300")),
        Err(Status::unavailable("still draining")), // no pushback: the backoff, 200 ms
        Ok("12.50".into()),
    ]);
    let dep = pricing(budgeted());
    let reply = quote(&dep, &GrpcClassifier::default(), &server.client(), Std::from_secs(5)).await;
    let reply = reply.expect("the operation succeeds").expect("with a reply");
    assert_eq!(reply.into_inner(), "sku-7: 12.50");
    assert_eq!(server.calls(), [Std::ZERO, Std::from_millis(300), Std::from_millis(500)]);
}

#[tokio::test(start_paused = true)]
async fn a_pushback_that_is_not_a_number_is_the_server_saying_do_not_retry() {
    let server = Pricing::new([Err(pushed_back(Status::unavailable("overloaded"), "-1"))]);
    let dep = pricing(budgeted());
    let err = quote(&dep, &GrpcClassifier::default(), &server.client(), Std::from_secs(5)).await.unwrap_err();
    assert_eq!(server.calls(), [Std::ZERO]);
    assert_eq!(err.completion().map(|c| (c.disposition, c.problem)), Some((Disposition::Failed, None)));
    let message = err.to_string();
    let last = err.into_last_failure().expect("the status");
    // tonic's own words for the status (they differ between its releases).
    assert_eq!(message, format!("pricing: failed after 1 attempt(s); last failure: {}", last.error));
    assert_eq!((last.error.code(), last.verdict), (Code::Unavailable, Verdict::NotRetryable));
}

#[tokio::test(start_paused = true)]
async fn a_pushback_past_the_deadline_defers_the_operation_with_the_servers_wait() {
    let server = Pricing::new([Err(pushed_back(Status::resource_exhausted("quota"), "30000"))]);
    let dep = pricing(budgeted());
    let err = quote(&dep, &GrpcClassifier::default(), &server.client(), Std::from_secs(5)).await.unwrap_err();
    assert_eq!(server.calls(), [Std::ZERO]);
    let completion = err.completion().expect("a completion");
    assert_eq!(completion.disposition, Disposition::Deferred);
    assert_eq!(err.retry_in(), Some(Std::from_secs(30)));
    // A service answering its own caller passes the wait on, in the same metadata.
    let mut answer = Status::unavailable("pricing is deferred");
    answer.metadata_mut().insert(PUSHBACK, pushback_value(err.retry_in().unwrap()));
    assert_eq!(answer.metadata().get(PUSHBACK).unwrap(), "30000");
}

/// A tonic server ends a call whose grpc-timeout has passed with CANCELLED, in its timeout's words
/// (the status tonic makes of `TimeoutExpired`); on the wire the cause is lost. The same timer as
/// the client's own (whichever fires first), so the same verdict: retried, not the server's answer.
#[tokio::test(start_paused = true)]
async fn a_servers_cancelled_at_the_calls_grpc_timeout_is_retried_as_a_timeout() {
    let server =
        Pricing::new([Err(Status::from_error(Box::new(tonic::TimeoutExpired(())))), Ok("12.50".into())]);
    let dep = pricing(budgeted());
    let reply = quote(&dep, &GrpcClassifier::default(), &server.client(), Std::from_secs(5)).await;
    assert_eq!(reply.expect("retried").expect("a reply").into_inner(), "sku-7: 12.50");
    assert_eq!(server.calls(), [Std::ZERO, Std::from_millis(100)]);
}

/// NOT_FOUND is the service's answer to a wrong request: the exchange worked, the caller gets the
/// status in `Ok`, and a breaker that trips on two consecutive failures never sees it. Two
/// INTERNALs trip it, and the next call is refused without reaching the server.
#[tokio::test(start_paused = true)]
async fn the_callers_own_errors_do_not_count_against_the_dependency_and_its_faults_do() {
    let server = Pricing::new([
        Err(Status::not_found("no sku-7")),
        Err(Status::not_found("no sku-7")),
        Err(Status::not_found("no sku-7")),
        Err(Status::internal("null pointer")),
        Err(Status::internal("null pointer")),
    ]);
    let dep = pricing(budgeted().breaker(BreakerConfig::consecutive_failures(2, Duration::from_secs(30))));
    let (grpc, client) = (GrpcClassifier::default(), server.client());
    for _ in 0..3 {
        let answer = quote(&dep, &grpc, &client, Std::from_secs(5)).await.expect("the exchange worked");
        assert_eq!(answer.expect_err("the service's answer").code(), Code::NotFound);
    }
    assert_eq!(dep.gauges().circuit, CircuitState::Closed);
    assert_eq!((dep.gauges().window.calls, dep.gauges().window.failures), (3, 0));
    for _ in 0..2 {
        let err =
            quote(&dep, &grpc, &client, Std::from_secs(5)).await.expect_err("a failure of the far side");
        // INTERNAL: counted, and not retried (a failure with no problem of the pipeline's own).
        assert_eq!(
            err.completion().map(|c| (c.disposition, c.summary.dispatched)),
            Some((Disposition::Failed, 1))
        );
    }
    assert_eq!(dep.gauges().circuit, CircuitState::Open);
    let err = quote(&dep, &grpc, &client, Std::from_secs(5)).await.expect_err("refused");
    assert_eq!(err.completion().unwrap().problem, Some(Problem::CircuitOpen));
    assert_eq!(server.calls().len(), 5, "the refused call reached the server");
}

/// A dependency whose ABORTED is a lost race that a second try wins: one rule, and the same
/// status is retried.
#[tokio::test(start_paused = true)]
async fn a_rule_of_the_callers_own_makes_a_code_retried() {
    let server = Pricing::new([Err(Status::aborted("lost the race")), Ok("12.50".into())]);
    let dep = pricing(budgeted());
    let grpc = GrpcClassifier::default().rule(Code::Aborted, relent_tokio::http::StatusRule::Retry);
    let reply = quote(&dep, &grpc, &server.client(), Std::from_secs(5)).await.unwrap().unwrap();
    assert_eq!(reply.into_inner(), "sku-7: 12.50");
    assert_eq!(server.calls(), [Std::ZERO, Std::from_millis(100)]);
}

/// A channel's service config, read as gRPC clients read it, runs a method's calls: its listed
/// code is retried within its attempts, UNAVAILABLE (unlisted) is not, the budget is its
/// throttling's, and a method with an entry of its own but no retry policy is sent once.
#[cfg(feature = "serde")]
#[tokio::test(start_paused = true)]
async fn a_service_configs_entry_for_the_method_decides_its_retries() {
    use relent_tokio::config::{GrpcMethodConfig, GrpcServiceConfig};
    let channel: GrpcServiceConfig = serde_json::from_str(
        r#"{ "methodConfig": [
               { "name": [{ "service": "pricing.Pricing" }], "timeout": "3s",
                 "retryPolicy": { "maxAttempts": 3, "initialBackoff": "0.1s", "maxBackoff": "1s",
                                  "backoffMultiplier": 2, "retryableStatusCodes": ["ABORTED"] } },
               { "name": [{ "service": "pricing.Pricing", "method": "Reserve" }], "timeout": "1s" } ],
             "retryThrottling": { "maxTokens": 10, "tokenRatio": 0.1 } }"#,
    )
    .unwrap();
    let budget = channel.retry_budget().expect("the file's throttling");
    let dep = pricing(relent_tokio::core::DependencyConfig::new(Duration::from_secs(10)).budget(budget));
    let call = |method: &GrpcMethodConfig, client: Client| {
        let (policy, grpc) = (method.policy(), method.classifier().clone());
        let context = Context::new(
            method.timeout().expect("the file's timeout"),
            ReplaySafety::replayable_read(Duration::from_secs(3600)),
        );
        let dep = &dep;
        async move {
            dep.execute(&policy, context, |_| {
                let (mut client, grpc) = (client.clone(), &grpc);
                async move { grpc.judge(client.quote("sku-7").await) }
            })
            .await
        }
    };

    let quote = channel.method("pricing.Pricing", "Quote");
    let server = Pricing::new([Err(Status::aborted("lost a race")), Ok("12.50".into())]);
    let reply = call(quote, server.client()).await.expect("retried").expect("a reply");
    assert_eq!(reply.into_inner(), "sku-7: 12.50");
    let calls = server.calls();
    // The backoff before the first retry is random(0, initialBackoff), with full jitter.
    assert!(calls.len() == 2 && calls[1] <= Std::from_millis(100), "{calls:?}");

    let server = Pricing::new([Err(Status::aborted("lost a race")), Err(Status::unavailable("draining"))]);
    let err = call(quote, server.client()).await.expect_err("UNAVAILABLE is not listed");
    assert_eq!(server.calls().len(), 2);
    let last = err.into_last_failure().expect("the status");
    assert_eq!((last.error.code(), last.verdict), (Code::Unavailable, Verdict::NotRetryable));

    let reserve = channel.method("pricing.Pricing", "Reserve");
    let server = Pricing::new([Err(Status::unavailable("draining"))]);
    let err = call(reserve, server.client()).await.expect_err("sent once");
    assert_eq!(err.completion().map(|c| c.summary.dispatched), Some(1));
    assert_eq!(server.calls(), [Std::ZERO]);
}

/// A service spawns its calls on the multi-threaded runtime and sends their errors on boxed (what
/// `anyhow` needs): the classifier, the judged status and the operation's future allow both.
#[test]
fn a_judged_call_spawns_on_the_multi_threaded_runtime_and_its_error_boxes() {
    const fn send_sync<T: Send + Sync + 'static>() {}
    const fn boxes<E: std::error::Error + Send + Sync + 'static>() {}
    send_sync::<GrpcClassifier>();
    boxes::<Error<Judged<HZ, Status>>>();

    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_time().build().unwrap();
    let answer = runtime.block_on(async {
        let server = Pricing::new([Err(Status::unavailable("restarting")), Ok("12.50".into())]);
        let (dep, grpc, client) = (pricing(budgeted()), GrpcClassifier::default(), server.client());
        let call = tokio::spawn(async move { quote(&dep, &grpc, &client, Std::from_secs(5)).await });
        call.await.unwrap().map(|reply| reply.map(tonic::Response::into_inner))
    });
    assert_eq!(answer.expect("the operation succeeds").expect("with a reply"), "sku-7: 12.50");
}

/// A service in the middle, "quotes", that prices each request through its own dependency on the
/// pricing server, and answers a failure as `answer` makes it a status; counting its calls.
fn quotes(
    pricing: Dependency,
    policy: RetryPolicy<HZ>,
    backend: Client,
    answer: fn(&Error<Judged<HZ, Status>>) -> Status,
    calls: Arc<Mutex<Vec<Std>>>,
) -> Client {
    let t0 = Instant::now();
    Client::of(move |request| {
        let (pricing, backend, calls, sku) =
            (pricing.clone(), backend.clone(), calls.clone(), request.into_inner());
        async move {
            calls.lock().unwrap().push(t0.elapsed());
            let grpc = GrpcClassifier::default();
            let priced = pricing
                .execute(&policy, read(Std::from_secs(5)), |_| {
                    let (mut backend, sku, grpc) = (backend.clone(), sku.clone(), &grpc);
                    async move { grpc.judge(backend.quote(&sku).await) }
                })
                .await;
            match priced {
                Ok(Ok(reply)) => Ok(reply.into_inner()),
                Ok(Err(answer)) => Err(answer), // the pricing server's answer, passed on
                Err(failure) => Err(answer(&failure)),
            }
        }
    })
}

/// Seed 000's three-attempt policy at two gRPC hops, and a pricing server that is down: the
/// quotes service retries it three times and says "do not retry" (pushback -1), so its caller
/// makes one call, and the pricing server sees 3 calls, not 9. The control answers with a bare
/// UNAVAILABLE, and the caller's retries multiply the calls.
#[tokio::test(start_paused = true)]
async fn a_service_that_retried_tells_its_caller_not_to_retry_again() {
    for (answer, middle_calls, backend_calls) in [
        (status_for::<Judged<HZ, Status>> as fn(&_) -> Status, 1, 3),
        (|e: &Error<Judged<HZ, Status>>| Status::unavailable(e.to_string()), 3, 9),
    ] {
        let pricing = Pricing::new((0..9).map(|_| Err(Status::unavailable("pricing is down"))));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let middle = quotes(self::pricing(budgeted()), POLICY, pricing.client(), answer, seen.clone());
        let front = Dependency::with_seed("quotes", budgeted(), 7).unwrap();
        let err = quote(&front, &GrpcClassifier::default(), &middle, Std::from_secs(10)).await.unwrap_err();
        assert_eq!((seen.lock().unwrap().len(), pricing.calls().len()), (middle_calls, backend_calls));
        if middle_calls == 1 {
            assert_eq!(pricing.calls(), [Std::ZERO, Std::from_millis(100), Std::from_millis(300)]);
            let last = err.into_last_failure().expect("the quotes service's status");
            assert_eq!((last.error.code(), last.verdict), (Code::Unavailable, Verdict::NotRetryable));
            assert_eq!(last.error.metadata().get(PUSHBACK).unwrap(), "-1");
            assert!(
                last.error
                    .message()
                    .starts_with("pricing: failed (attempts_exhausted) after 3 attempt(s); last failure: "),
                "{}",
                last.error.message()
            );
        }
    }
}

/// The quotes service's circuit to the pricing server opens on one failure, for 1 s. Its caller's
/// first call fails and is not retried (the quotes service's one attempt met an INTERNAL, not
/// retryable: pushback -1); its second is refused at once by the open circuit, with the break's
/// second as the pushback, which the caller waits out before its retry, which the pricing server,
/// recovered, answers.
#[tokio::test(start_paused = true)]
async fn an_open_circuit_behind_a_service_is_waited_out_by_its_caller() {
    let pricing = Pricing::new([Err(Status::internal("pricing crashed")), Ok("12.50".into())]);
    let breaker = BreakerConfig::consecutive_failures(1, Duration::from_secs(1));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let middle = quotes(
        self::pricing(budgeted().breaker(breaker)),
        POLICY.without_retries(),
        pricing.client(),
        status_for,
        seen.clone(),
    );
    let front = Dependency::with_seed("quotes", budgeted(), 7).unwrap();
    let grpc = GrpcClassifier::default();
    let t0 = Instant::now();
    let first = quote(&front, &grpc, &middle, Std::from_secs(5)).await.unwrap_err();
    let status = first.into_last_failure().expect("a status").error;
    assert_eq!(
        (status.code(), status.metadata().get(PUSHBACK).unwrap().to_str().unwrap()),
        (Code::Unavailable, "-1")
    );
    let second = quote(&front, &grpc, &middle, Std::from_secs(5)).await.expect("the retry after the break");
    assert_eq!(second.expect("a reply").into_inner(), "sku-7: 12.50");
    assert_eq!(*seen.lock().unwrap(), [Std::ZERO, Std::ZERO, Std::from_secs(1)]);
    assert_eq!(pricing.calls(), [Std::ZERO, Std::from_secs(1)]);
    assert_eq!(t0.elapsed(), Std::from_secs(1));
}

/// An operation that never started is a fault of the service's own code: INTERNAL, whose default
/// rule is a failure its caller does not retry.
#[tokio::test(start_paused = true)]
async fn an_operation_that_never_started_is_an_internal_error() {
    let pricing = self::pricing(budgeted());
    let unsafe_call = Context::new(Duration::from_secs(5), ReplaySafety::Unsafe);
    let err = pricing
        .execute(&POLICY, unsafe_call, |_| async { Ok::<_, Judged<HZ, Status>>(()) })
        .await
        .unwrap_err();
    let status = status_for(&err);
    assert_eq!((status.code(), status.message()), (Code::Internal, err.to_string().as_str()));
    assert_eq!(
        GrpcClassifier::default().exchange(&status),
        relent_tokio::http::Exchange::Failure(Verdict::NotRetryable)
    );
}

/// A caller that waits 1 s for its attempt says so (`set_timeout`, tonic's `grpc-timeout`); the
/// service reads it (`grpc::deadline`) and runs its own call in that deadline's scope, so its call
/// to a pricing server that hangs ends at 1 s, not at its own 5 s deadline, and it answers before
/// its caller gives up. A second call of a caller that sends a timeout gRPC does not write is
/// refused with INVALID_ARGUMENT, the handler's own call never made.
#[tokio::test(start_paused = true)]
async fn a_service_ends_its_own_calls_when_its_caller_stops_waiting() {
    let hung = Client::of(|_| std::future::pending::<Result<String, Status>>());
    let pricing = self::pricing(budgeted());
    let t0 = Instant::now();
    // The deadline the handler read, when its own call ended, and how.
    type Ended = Vec<(Std, Std, &'static str)>;
    let ended: Arc<Mutex<Ended>> = Arc::default();
    let record = ended.clone();
    let quotes = Client::of(move |request: tonic::Request<String>| {
        let (pricing, hung, record) = (pricing.clone(), hung.clone(), record.clone());
        async move {
            let within = relent_tokio::grpc::deadline(&request)?
                .unwrap_or_else(|| relent_tokio::RequestDeadline::within(Std::from_secs(30)));
            let left = within.remaining_at(Instant::now());
            let grpc = GrpcClassifier::default();
            let priced = within
                .scope(pricing.execute(&POLICY, read(Std::from_secs(5)), |_| {
                    let (mut hung, grpc) = (hung.clone(), &grpc);
                    async move { grpc.judge(hung.quote("sku-7").await) }
                }))
                .await;
            let err = priced.expect_err("the pricing server hangs");
            record.lock().unwrap().push((left, t0.elapsed(), err.code()));
            Err::<String, _>(status_for(&err))
        }
    });
    let front = Dependency::with_seed("quotes", budgeted(), 7).unwrap();
    let once = RetryPolicy::<HZ>::exponential(1, Duration::from_millis(100), Duration::from_secs(1))
        .attempt_timeout(Duration::from_secs(1))
        .build()
        .unwrap();
    let answer = front
        .execute(&once, read(Std::from_secs(10)), |attempt| {
            let mut quotes = quotes.clone();
            async move {
                let mut request = tonic::Request::new("sku-7".to_string());
                request.set_timeout(attempt.timeout());
                GrpcClassifier::default().judge(quotes.send(request).await)
            }
        })
        .await
        .unwrap_err();
    assert_eq!(
        *ended.lock().unwrap(),
        [(Std::from_secs(1), Std::from_secs(1), "retry_delay_exceeds_deadline")]
    );
    let status = answer.into_last_failure().expect("the service's answer, in time").error;
    assert!(
        status.message().starts_with("pricing: failed (retry_delay_exceeds_deadline) after 1 attempt(s)"),
        "{}",
        status.message()
    );

    let mut bad = tonic::Request::new("sku-7".to_string());
    bad.metadata_mut().insert(relent_tokio::grpc::TIMEOUT, "1.5S".parse().unwrap());
    let refused = quotes.clone().send(bad).await.expect_err("refused");
    assert_eq!(refused.code(), Code::InvalidArgument);
    assert_eq!(ended.lock().unwrap().len(), 1, "the handler's own call was made");
}

/// A call to a server behind `grpc::DeadlineLayer` (every method at once).
async fn send_layered(
    client: &mut tonic::client::Grpc<relent_tokio::grpc::Deadline<Wire>>,
    request: tonic::Request<String>,
) -> Result<tonic::Response<String>, Status> {
    client.ready().await.expect("an in-process service is always ready");
    let path = http::uri::PathAndQuery::from_static("/pricing.Pricing/Quote");
    client.unary(request, path, Text).await
}

/// Behind the layer, each call's handler runs by its caller's `grpc-timeout`, or by the server's
/// 10 s limit when the caller sends none or more: as the bound of its own calls
/// (`attempt_expiry`) and in its request's extensions. A `grpc-timeout` gRPC does not write is
/// answered over the wire with INVALID_ARGUMENT and the reason, and the handler never runs.
#[tokio::test(start_paused = true)]
async fn a_server_behind_the_deadline_layer_serves_each_call_by_its_callers_deadline() {
    use tower::Layer;
    type Seen = Vec<(Option<Std>, Option<Std>)>;
    let seen: Arc<Mutex<Seen>> = Arc::default();
    let record = seen.clone();
    let handler: Handler = Arc::new(move |request: tonic::Request<String>| {
        let now = Instant::now();
        let bound = relent_tokio::attempt_expiry().map(|end| end - now);
        let extension =
            request.extensions().get::<relent_tokio::RequestDeadline>().map(|d| d.remaining_at(now));
        record.lock().unwrap().push((bound, extension));
        Box::pin(async { Ok("12.50".to_string()) })
    });
    let server = relent_tokio::grpc::DeadlineLayer::new(Std::from_secs(10)).layer(Wire(handler));
    let mut client = tonic::client::Grpc::new(server);
    let within = |timeout: Option<Std>| {
        let mut request = tonic::Request::new("sku-7".to_string());
        if let Some(timeout) = timeout {
            request.set_timeout(timeout);
        }
        request
    };
    for timeout in [Some(Std::from_millis(250)), None, Some(Std::from_secs(3_600))] {
        let reply = send_layered(&mut client, within(timeout)).await.expect("served");
        assert_eq!(reply.into_inner(), "12.50");
    }
    let (quarter, ten) = (Some(Std::from_millis(250)), Some(Std::from_secs(10)));
    assert_eq!(*seen.lock().unwrap(), [(quarter, quarter), (ten, ten), (ten, ten)]);

    let mut bad = within(None);
    bad.metadata_mut().insert(relent_tokio::grpc::TIMEOUT, "2.5S".parse().unwrap());
    let refused = send_layered(&mut client, bad).await.expect_err("refused");
    assert_eq!(
        (refused.code(), refused.message()),
        (
            Code::InvalidArgument,
            "`2.5S` in grpc-timeout is not a timeout: gRPC writes one as up to 8 digits and a unit (H, M, S, m, u \
             or n), such as 250m"
        )
    );
    assert_eq!(seen.lock().unwrap().len(), 3, "the handler ran for the refused call");
}

/// A hedged call: the first node hangs, the hedge at 50 ms reaches one that answers NOT_FOUND.
/// That answer is the service's to this request, so it ends the race as a reply would: the
/// operation returns it at 50 ms, one hedge sent, and the dependency counts a success.
#[tokio::test(start_paused = true)]
async fn an_answer_to_the_callers_request_ends_a_hedged_race_as_a_reply_would() {
    let nodes = Arc::new(Mutex::new(0_u32));
    let pricing = Client::of(move |_| {
        let nodes = nodes.clone();
        async move {
            let node = std::mem::replace(&mut *nodes.lock().unwrap(), 1);
            if node == 0 {
                std::future::pending::<()>().await; // the first node hangs
            }
            Err::<String, _>(Status::not_found("no sku-7"))
        }
    });
    let dep = self::pricing(budgeted());
    let grpc = GrpcClassifier::default();
    let t0 = Instant::now();
    let answer = dep
        .execute_hedged(&POLICY, read(Std::from_secs(5)), Std::from_millis(50), |_| {
            let (mut pricing, grpc) = (pricing.clone(), &grpc);
            async move { grpc.judge(pricing.quote("sku-7").await) }
        })
        .await
        .expect("the exchange worked");
    assert_eq!(answer.expect_err("the service's answer").code(), Code::NotFound);
    assert_eq!(t0.elapsed(), Std::from_millis(50));
    let gauges = dep.gauges();
    assert_eq!((gauges.window.failures, gauges.hedges_sent, gauges.hedges_won), (0, 1, 1));
}
