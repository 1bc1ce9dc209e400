//! What the gRPC tests share: a server and a client of one method, `pricing.Pricing/Quote`, with
//! tonic's own codecs, and the dependency they call it through. Each test file uses a part of it.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration as Std;

use bytes::{Buf, BufMut};
use relent_tokio::core::{Context, DependencyConfig, ReplaySafety, RetryBudget};
use relent_tokio::{Dependency, Duration, HZ};
use tokio::time::Instant;
use tonic::Status;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};

/// Messages are UTF-8 text: the codec the generated code would take from prost, without protoc.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Text;

impl Codec for Text {
    type Encode = String;
    type Decode = String;
    type Encoder = Self;
    type Decoder = Self;
    fn encoder(&mut self) -> Self {
        Self
    }
    fn decoder(&mut self) -> Self {
        Self
    }
}

impl Encoder for Text {
    type Item = String;
    type Error = Status;
    fn encode(&mut self, item: String, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put_slice(item.as_bytes());
        Ok(())
    }
}

impl Decoder for Text {
    type Item = String;
    type Error = Status;
    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<String>, Status> {
        let bytes = src.copy_to_bytes(src.remaining());
        String::from_utf8(bytes.to_vec()).map(Some).map_err(|e| Status::internal(e.to_string()))
    }
}

/// What the pricing server answers, call by call, and when each call came (from `t0`).
#[derive(Clone)]
pub(crate) struct Pricing {
    script: Arc<Mutex<VecDeque<Result<String, Status>>>>,
    calls: Arc<Mutex<Vec<Std>>>,
    t0: Instant,
}

impl Pricing {
    pub(crate) fn new(script: impl IntoIterator<Item = Result<String, Status>>) -> Self {
        Self {
            script: Arc::new(Mutex::new(script.into_iter().collect())),
            calls: Arc::default(),
            t0: Instant::now(),
        }
    }

    pub(crate) fn calls(&self) -> Vec<Std> {
        self.calls.lock().unwrap().clone()
    }

    /// A client of this server: tonic's client `Grpc` over the server's HTTP service.
    pub(crate) fn client(&self) -> Client {
        Client(tonic::client::Grpc::new(Wire(self.handler())))
    }

    /// What the server does with a call: counts it, and answers with the script's next line.
    pub(crate) fn handler(&self) -> Handler {
        let server = self.clone();
        Arc::new(move |request| {
            let (server, sku) = (server.clone(), request.into_inner());
            Box::pin(async move {
                server.calls.lock().unwrap().push(server.t0.elapsed());
                let next = server.script.lock().unwrap().pop_front().expect("a scripted answer");
                next.map(|price| format!("{sku}: {price}"))
            })
        })
    }
}

/// A server's handler: the request (its message and metadata) to the reply's message, or a status.
pub(crate) type Handler = Arc<
    dyn Fn(tonic::Request<String>) -> Pin<Box<dyn Future<Output = Result<String, Status>> + Send>>
        + Send
        + Sync,
>;

/// A server as an HTTP service: tonic's server `Grpc` (request decoding, the handler, status
/// encoding) for each request. `Send + Sync`, as a tonic `Channel` is.
#[derive(Clone)]
pub(crate) struct Wire(pub Handler);

impl tower::Service<http::Request<tonic::body::Body>> for Wire {
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<tonic::body::Body>) -> Self::Future {
        let handler = self.0.clone();
        let service = tower::service_fn(move |request: tonic::Request<String>| {
            let reply = handler(request);
            async move { reply.await.map(tonic::Response::new) }
        });
        Box::pin(async move { Ok(tonic::server::Grpc::new(Text).unary(service, request).await) })
    }
}

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// What a generated client would be: one method, `Quote`; over the server in the process, or over
/// a tonic `Channel` to a socket.
#[derive(Clone)]
pub(crate) struct Client<T = Wire>(pub tonic::client::Grpc<T>);

impl Client {
    /// A client of a server that answers with `handler`.
    pub(crate) fn of<F, Fut>(handler: F) -> Self
    where
        F: Fn(tonic::Request<String>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<String, Status>> + Send + 'static,
    {
        let handler: Handler = Arc::new(move |request| Box::pin(handler(request)));
        Self(tonic::client::Grpc::new(Wire(handler)))
    }
}

impl<T> Client<T>
where
    T: tonic::client::GrpcService<tonic::body::Body>,
    T::Error: Into<BoxError>,
    T::ResponseBody: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    <T::ResponseBody as http_body::Body>::Error: Into<BoxError>,
{
    pub(crate) async fn quote(&mut self, sku: &str) -> Result<tonic::Response<String>, Status> {
        self.send(tonic::Request::new(sku.to_string())).await
    }

    pub(crate) async fn send(
        &mut self,
        request: tonic::Request<String>,
    ) -> Result<tonic::Response<String>, Status> {
        // As generated code does: a service that cannot take the call is an UNKNOWN status.
        self.0.ready().await.map_err(|e| Status::unknown(format!("not ready: {}", e.into())))?;
        let path = http::uri::PathAndQuery::from_static("/pricing.Pricing/Quote");
        self.0.unary(request, path, Text).await
    }
}

pub(crate) fn pricing(config: DependencyConfig<HZ>) -> Dependency {
    Dependency::with_seed("pricing", config, 7).unwrap()
}

pub(crate) fn budgeted() -> DependencyConfig<HZ> {
    DependencyConfig::new(Duration::from_secs(10)).budget(RetryBudget::ratio(10, 10).unwrap())
}

pub(crate) fn read(deadline: Std) -> Context<HZ> {
    Context::new(relent_tokio::ticks(deadline), ReplaySafety::replayable_read(Duration::from_secs(3600)))
}
