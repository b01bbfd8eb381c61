//! One listener's accept loop and connections, with the limits that keep slow or idle clients
//! from holding the service: a cap on open connections, a header-read timeout and a keep-alive
//! timeout. axum's `serve` has neither a cap nor a header-read timeout, so connections are
//! driven through hyper here.
//!
//! At the cap the loop stops accepting (new connections wait in the kernel's queue) and resumes
//! as connections close; running out of descriptors (`EMFILE`) backs off rather than spinning.
//! Both states are logged when they begin and end, not per connection.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::{Instant, Sleep};
use tower_service::Service;

/// First pause after an accept fails for want of descriptors or memory; it doubles up to
/// [`MAX_ACCEPT_BACKOFF`]. Short, since descriptors free up as connections close.
const FIRST_ACCEPT_BACKOFF: Duration = Duration::from_millis(10);

/// Longest pause between accept attempts while out of descriptors.
const MAX_ACCEPT_BACKOFF: Duration = Duration::from_secs(1);

/// A listener's connection limits.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConnectionLimits {
    /// Longest a request head may take, from the accept or a later request's first byte.
    pub(crate) header_read_timeout: Duration,
    /// Longest wait for the next request on a kept-alive connection, head included.
    pub(crate) keep_alive_timeout: Duration,
    /// Most connections open at once.
    pub(crate) max_connections: usize,
}

/// Serves `router` on `listener` until `stop` turns true, then closes idle connections, lets the
/// others finish their request, and returns once all are closed.
pub(crate) async fn serve(
    name: &'static str,
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut at_cap = false;
    let mut backoff = None::<Duration>;
    loop {
        let permit = match slots.clone().try_acquire_owned() {
            Ok(permit) => permit,
            Err(_) => {
                if !at_cap {
                    at_cap = true;
                    tracing::warn!(
                        listener = name,
                        max_connections = limits.max_connections,
                        "at the connection cap: not accepting until connections close"
                    );
                }
                tokio::select! {
                    permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
                    _ = stop.wait_for(|stop| *stop) => break,
                }
            }
        };
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|stop| *stop) => break,
        };
        match accepted {
            Ok((stream, peer)) => {
                // Left only once a tenth of the slots is free: connections queued while at the
                // cap fill freed slots at once, and the log should not flap at the edge.
                if at_cap && slots.available_permits() + 1 >= limits.max_connections.div_ceil(10) {
                    at_cap = false;
                    tracing::info!(listener = name, "below the connection cap: accepting again");
                }
                if backoff.take().is_some() {
                    tracing::info!(listener = name, "accepting connections again");
                }
                let _ = stream.set_nodelay(true);
                let connection = serve_connection(stream, peer, router.clone(), limits, stop.clone());
                tokio::spawn(async move {
                    connection.await;
                    drop(permit);
                });
            }
            Err(error) if is_resource_shortage(&error) => {
                let pause = backoff.map_or(FIRST_ACCEPT_BACKOFF, |pause| (pause * 2).min(MAX_ACCEPT_BACKOFF));
                if backoff.is_none() {
                    tracing::error!(
                        listener = name,
                        %error,
                        "cannot accept connections (out of file descriptors?); retrying with backoff"
                    );
                }
                backoff = Some(pause);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = stop.wait_for(|stop| *stop) => break,
                }
            }
            // A connection that failed before it was accepted (reset, aborted) concerns only it.
            Err(_) => {}
        }
    }
    drop(listener);
    // Every connection holds a permit until it closes: having them all back means all are closed.
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let _ = slots.acquire_many(all).await;
}

/// Whether a failed accept says the process or system is short of descriptors or memory, which
/// retrying at once would only repeat.
fn is_resource_shortage(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(code) if [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM].contains(&code))
}

/// Serves one connection's requests until it closes, times out, or is asked to stop.
async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    mut stop: watch::Receiver<bool>,
) {
    let head = Arc::new(HeadClock::new());
    let io = TokioIo::new(Watched { stream, head: head.clone() });
    let clock = head.clone();
    let service = service_fn(move |mut request: hyper::Request<Incoming>| {
        clock.request_started();
        // What `into_make_service_with_connect_info` would add: the handlers read the TCP peer.
        request.extensions_mut().insert(ConnectInfo(peer));
        let mut router = router.clone();
        let clock = clock.clone();
        async move {
            let response = router.call(request).await;
            clock.response_ready();
            response
        }
    });
    let connection = http1::Builder::new()
        .timer(TokioTimer::new())
        // hyper's timer runs from the moment it waits for a head, idle time included: that is
        // the keep-alive timeout. The header-read timeout proper is `HeadClock`'s.
        .header_read_timeout(limits.keep_alive_timeout.max(limits.header_read_timeout))
        .serve_connection(io, service);
    tokio::pin!(connection);
    let mut deadline = Box::pin(tokio::time::sleep(limits.header_read_timeout));
    let mut stopping = false;
    loop {
        tokio::select! {
            () = poll_fn(|cx| poll_with_head_deadline(connection.as_mut(), &head, &mut deadline, limits, cx)) => {
                // Finished, failed or overdue: dropping the connection closes the socket.
                return;
            }
            _ = stop.wait_for(|stop| *stop), if !stopping => {
                // A head still on its way is no request yet: nothing is lost by closing now,
                // rather than waiting out its timeout.
                if head.started().is_some() {
                    return;
                }
                stopping = true;
                connection.as_mut().graceful_shutdown();
            }
        }
    }
}

/// Polls the connection, then arms `deadline` for the request head in progress, if any; ready
/// when the connection is done or the head is overdue.
fn poll_with_head_deadline<F: Future>(
    connection: Pin<&mut F>,
    head: &HeadClock,
    deadline: &mut Pin<Box<Sleep>>,
    limits: ConnectionLimits,
    cx: &mut Context<'_>,
) -> Poll<()> {
    if connection.poll(cx).is_ready() {
        return Poll::Ready(());
    }
    // Polling the connection is what reads, so any head that began has been seen by now.
    let Some(started) = head.started() else {
        return Poll::Pending;
    };
    let due = started + limits.header_read_timeout;
    if deadline.deadline() != due {
        deadline.as_mut().reset(due);
    }
    deadline.as_mut().poll(cx)
}

/// When the request head being read began: at the accept, then at the first byte read after
/// each response. Shared by the socket (which sees bytes arrive) and the service (which sees
/// heads complete), without a lock.
struct HeadClock {
    /// The connection's start, against which the times below are measured.
    epoch: Instant,
    /// Milliseconds after `epoch` plus one when the current head began; 0 when no head is being
    /// read (a request is in flight, or the connection waits for the next one).
    started: AtomicU64,
    /// Whether the next byte read begins a head.
    awaiting: AtomicBool,
}

impl HeadClock {
    fn new() -> Self {
        // The first head is timed from the accept: a client that connects and sends nothing is
        // as slow as one that sends half a head.
        HeadClock { epoch: Instant::now(), started: AtomicU64::new(1), awaiting: AtomicBool::new(false) }
    }

    fn started(&self) -> Option<Instant> {
        match self.started.load(Ordering::Relaxed) {
            0 => None,
            offset => Some(self.epoch + Duration::from_millis(offset - 1)),
        }
    }

    fn bytes_read(&self) {
        if self.awaiting.load(Ordering::Relaxed) && self.awaiting.swap(false, Ordering::Relaxed) {
            let offset = self.epoch.elapsed().as_millis() as u64 + 1;
            self.started.store(offset, Ordering::Relaxed);
        }
    }

    fn request_started(&self) {
        self.awaiting.store(false, Ordering::Relaxed);
        self.started.store(0, Ordering::Relaxed);
    }

    fn response_ready(&self) {
        self.awaiting.store(true, Ordering::Relaxed);
    }
}

/// A TCP stream that tells its [`HeadClock`] when bytes arrive.
struct Watched {
    stream: TcpStream,
    head: Arc<HeadClock>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let result = Pin::new(&mut self.stream).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.head.bytes_read();
        }
        result
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}
