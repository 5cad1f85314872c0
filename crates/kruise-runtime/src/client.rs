//! The kube `Client` every controller uses: a client-side token bucket (QPS/burst, like
//! client-go's) and per-request metrics (verb, resource, code) as tower layers.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use http::{Method, Request, Response};
use kube::client::ClientBuilder;
use kube::{Client, Config};
use tokio::time::{Instant, Sleep};
use tower::{Layer, Service};

use crate::metrics::Metrics;

/// Builds a client from a kube `Config` with rate limiting and metrics.
pub fn build(
    config: Config,
    qps: f64,
    burst: u32,
    metrics: &Metrics,
) -> Result<Client, kube::Error> {
    let builder = ClientBuilder::try_from(config)?
        .with_layer(&MetricsLayer {
            metrics: metrics.clone(),
        })
        .with_layer(&RateLimitLayer::new(qps, burst));
    Ok(builder.build())
}

/// Builds a client from the environment (`KUBECONFIG`, or in-cluster).
pub async fn from_env(qps: f64, burst: u32, metrics: &Metrics) -> Result<Client, kube::Error> {
    let config = Config::infer().await.map_err(kube::Error::InferConfig)?;
    build(config, qps, burst, metrics)
}

/// A token bucket that hands out reservations: a request that finds the bucket empty is
/// told how long to wait for its token, so waiting requests keep their order.
#[derive(Debug)]
pub struct TokenBucket {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl TokenBucket {
    /// `qps <= 0` means unlimited.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        TokenBucket {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Takes one token and returns how long to wait before using it.
    pub fn reserve(&self) -> Duration {
        self.reserve_at(Instant::now())
    }

    fn reserve_at(&self, now: Instant) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut state = self
            .state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (tokens, last) = *state;
        let refilled =
            (tokens + now.saturating_duration_since(last).as_secs_f64() * self.qps).min(self.burst);
        let left = refilled - 1.0;
        *state = (left, now.max(last));
        if left >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-left / self.qps)
        }
    }
}

#[derive(Clone)]
pub struct RateLimitLayer {
    bucket: Arc<TokenBucket>,
}

impl RateLimitLayer {
    pub fn new(qps: f64, burst: u32) -> Self {
        RateLimitLayer {
            bucket: Arc::new(TokenBucket::new(qps, burst)),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;
    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            bucket: self.bucket.clone(),
            state: RateState::Idle,
        }
    }
}

/// Waits for a token in `poll_ready`, so the request is only sent once it has one.
pub struct RateLimit<S> {
    inner: S,
    bucket: Arc<TokenBucket>,
    state: RateState,
}

enum RateState {
    Idle,
    Waiting(Pin<Box<Sleep>>),
    Ready,
}

impl<S, B> Service<Request<B>> for RateLimit<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        loop {
            match &mut self.state {
                RateState::Idle => {
                    let wait = self.bucket.reserve();
                    self.state = if wait.is_zero() {
                        RateState::Ready
                    } else {
                        RateState::Waiting(Box::pin(tokio::time::sleep(wait)))
                    };
                }
                RateState::Waiting(sleep) => {
                    ready!(sleep.as_mut().poll(cx));
                    self.state = RateState::Ready;
                }
                RateState::Ready => return self.inner.poll_ready(cx),
            }
        }
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.state = RateState::Idle;
        self.inner.call(req)
    }
}

#[derive(Clone)]
pub struct MetricsLayer {
    metrics: Metrics,
}

impl<S> Layer<S> for MetricsLayer {
    type Service = RequestMetrics<S>;
    fn layer(&self, inner: S) -> RequestMetrics<S> {
        RequestMetrics {
            inner,
            metrics: self.metrics.clone(),
        }
    }
}

/// Counts every request by verb, resource and response code.
pub struct RequestMetrics<S> {
    inner: S,
    metrics: Metrics,
}

impl<S, B, RB> Service<Request<B>> for RequestMetrics<S>
where
    S: Service<Request<B>, Response = Response<RB>>,
    S::Future: Send + 'static,
    S::Error: 'static,
    RB: 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<RB>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let (verb, resource) = classify(
            req.method(),
            req.uri().path(),
            req.uri().query().unwrap_or(""),
        );
        let metrics = self.metrics.clone();
        let started = Instant::now();
        let fut = self.inner.call(req);
        Box::pin(async move {
            let result = fut.await;
            let code = match &result {
                Ok(resp) => resp.status().as_u16().to_string(),
                Err(_) => "error".to_string(),
            };
            metrics
                .api_requests
                .with_label_values(&[verb, &resource, &code])
                .inc();
            metrics
                .api_request_duration
                .with_label_values(&[verb])
                .observe(started.elapsed().as_secs_f64());
            result
        })
    }
}

/// The Kubernetes verb and resource (`pods`, `pods/status`, `clonesets`) of a request.
pub fn classify(method: &Method, path: &str, query: &str) -> (&'static str, String) {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    // /api/v1/... or /apis/<group>/<version>/...
    let rest: &[&str] = match segments.first() {
        Some(&"api") => segments.get(2..).unwrap_or(&[]),
        Some(&"apis") => segments.get(3..).unwrap_or(&[]),
        _ => &[],
    };
    // namespaces/<ns>/<resource>/... (but `namespaces` and `namespaces/<ns>` are the resource itself)
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let resource = match rest {
        [] => "other".to_string(),
        [resource] | [resource, _] => resource.to_string(),
        [resource, _, sub, ..] => format!("{resource}/{sub}"),
    };
    let named = rest.len() >= 2;
    let watch = query
        .split('&')
        .any(|kv| kv == "watch=true" || kv == "watch=1");
    let verb = match *method {
        Method::GET if watch => "watch",
        Method::GET if named => "get",
        Method::GET => "list",
        Method::POST => "create",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE if named => "delete",
        Method::DELETE => "deletecollection",
        _ => "other",
    };
    (verb, resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_requests_like_the_apiserver_audit_log() {
        let cases = [
            (
                Method::GET,
                "/api/v1/namespaces/ns/pods",
                "",
                "list",
                "pods",
            ),
            (
                Method::GET,
                "/api/v1/pods",
                "watch=true&resourceVersion=1",
                "watch",
                "pods",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns/pods/p1",
                "",
                "get",
                "pods",
            ),
            (
                Method::POST,
                "/api/v1/namespaces/ns/pods",
                "",
                "create",
                "pods",
            ),
            (
                Method::PATCH,
                "/api/v1/namespaces/ns/pods/p1/status",
                "",
                "patch",
                "pods/status",
            ),
            (
                Method::DELETE,
                "/api/v1/namespaces/ns/pods/p1",
                "",
                "delete",
                "pods",
            ),
            (
                Method::PATCH,
                "/apis/apps.kruise.io/v1alpha1/namespaces/ns/clonesets/c/status",
                "",
                "patch",
                "clonesets/status",
            ),
            (
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l",
                "",
                "update",
                "leases",
            ),
            (
                Method::GET,
                "/api/v1/namespaces/ns",
                "",
                "get",
                "namespaces",
            ),
            (Method::GET, "/api/v1/namespaces", "", "list", "namespaces"),
            (Method::GET, "/version", "", "list", "other"),
        ];
        for (method, path, query, verb, resource) in cases {
            assert_eq!(
                classify(&method, path, query),
                (verb, resource.to_string()),
                "{method} {path}"
            );
        }
    }

    #[tokio::test(start_paused = true)]
    async fn bucket_allows_a_burst_then_the_rate() {
        let bucket = TokenBucket::new(10.0, 5);
        let now = Instant::now();
        for _ in 0..5 {
            assert_eq!(bucket.reserve_at(now), Duration::ZERO);
        }
        // The 6th and 7th requests wait 100ms and 200ms for their tokens.
        assert_eq!(bucket.reserve_at(now), Duration::from_millis(100));
        assert_eq!(bucket.reserve_at(now), Duration::from_millis(200));
        // After a second the bucket has refilled to its burst, never beyond.
        let later = now + Duration::from_secs(10);
        for _ in 0..5 {
            assert_eq!(bucket.reserve_at(later), Duration::ZERO);
        }
        assert!(bucket.reserve_at(later) > Duration::ZERO);
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let bucket = TokenBucket::new(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(bucket.reserve(), Duration::ZERO);
        }
    }

    #[tokio::test(start_paused = true)]
    async fn layer_delays_requests_beyond_the_burst() {
        let svc = tower::service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(Response::new(()))
        });
        let mut limited = RateLimitLayer::new(2.0, 2).layer(svc);
        let start = Instant::now();
        for _ in 0..4 {
            tower::ServiceExt::ready(&mut limited).await.unwrap();
            limited.call(Request::new(())).await.unwrap();
        }
        // Two free, then two more at 2/s: the 4th waits a full second.
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }
}
