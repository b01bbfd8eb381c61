//! The rule workers: a bounded pool of threads of their own, each owning one Lua state, that
//! evaluate rules for the verdict handler.
//!
//! Rules never run on the async runtime's threads, so `/health`, trap pages, reloads and
//! shutdown never wait on a rule. A caller queues a job and waits for its answer up to a
//! deadline; past it, the request gets the fail mode and the worker is *abandoned*: a
//! replacement takes its place, and the stuck thread, if it ever returns, discards its Lua state
//! and ends. The time limit (see `watchdog.rs`) stops Lua code; the deadline here is the backstop
//! for what it cannot stop, such as a long call into C.
//!
//! Deadlines: a job may wait in the queue for [`QUEUE_WAIT`] (all workers busy under overload).
//! Once a worker has started it, the caller looks at it every time limit plus [`MARGIN`], and
//! gives up when, since its first look, the evaluation has used more than that again in CPU
//! time: more than the time limit lets Lua code run, so it is stuck in C. CPU time rather than
//! wall time, so that an overloaded machine, which only runs the worker more slowly, does not
//! get rules abandoned that the time limit would have stopped; [`STUCK_WALL`] bounds the wait
//! when the worker gets no CPU at all.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::oneshot;

use super::lua::Evaluator;
use super::report::ErrorLog;
use super::watchdog::CpuClock;
use super::{Compiled, Decision, RuleOutcome};
use crate::facts::Facts;

/// How long a job may wait for a free worker before the request gets the fail mode.
pub(super) const QUEUE_WAIT: Duration = Duration::from_secs(1);
/// Added to the time limit: the interval of a caller's looks at a started job, and the CPU time
/// past its first look after which it is abandoned.
pub(super) const MARGIN: Duration = Duration::from_millis(50);
/// Wall time after which a started evaluation is abandoned whatever its CPU time.
pub(super) const STUCK_WALL: Duration = Duration::from_secs(2);
/// Jobs that may wait per worker; past that, the request gets the fail mode at once.
const QUEUE_PER_WORKER: usize = 1024;
/// Abandoned threads still running, per worker, past which no replacement is started.
const ABANDONED_PER_WORKER: usize = 4;

/// Why a job got no answer from the rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Unanswered {
    /// The queue was full or no worker started the job within [`QUEUE_WAIT`].
    Busy,
    /// A worker started it and did not finish by the deadline.
    Stuck,
}

impl Unanswered {
    /// The failure's text, as a rule error's.
    pub(super) fn message(self) -> &'static str {
        match self {
            Unanswered::Busy => "no rule worker was free in time",
            Unanswered::Stuck => "the rules did not finish in time; their worker was replaced",
        }
    }
}

/// A job's answer.
pub(super) struct Answer {
    pub(super) decision: Decision,
    pub(super) trace: Vec<RuleOutcome>,
}

enum Reply {
    Async(oneshot::Sender<Answer>),
    Blocking(std::sync::mpsc::SyncSender<Answer>),
}

/// What the caller and the worker both see of a job.
struct Progress {
    /// When a worker started evaluating, in nanoseconds since `EPOCH` (never 0); 0 until then.
    started: AtomicU64,
    /// The worker that took the job, and its thread's CPU clock (`CpuClock::to_raw`).
    worker: AtomicUsize,
    clock: AtomicI64,
    /// Set when the caller stopped waiting: a worker skips the job.
    cancelled: AtomicBool,
}

struct Job {
    facts: Arc<Facts>,
    tracing: bool,
    progress: Arc<Progress>,
    reply: Reply,
}

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// The pool. Dropping it ends the workers once they finish what they are doing.
pub(super) struct Pool {
    jobs: Sender<Job>,
    shared: Arc<Shared>,
}

/// What workers share with the pool; holds no `Sender`, so that dropping the pool ends them.
struct Shared {
    jobs: Receiver<Job>,
    current: Arc<ArcSwap<Compiled>>,
    workers: usize,
    /// Threads running, abandoned ones included.
    live: AtomicUsize,
    next_id: AtomicUsize,
    /// Each running worker's id and its abandoned flag.
    abandoned: Mutex<Vec<(usize, Arc<AtomicBool>)>>,
}

impl Pool {
    /// Starts `workers` threads evaluating the ruleset in `current`.
    pub(super) fn start(current: Arc<ArcSwap<Compiled>>, workers: usize) -> Result<Pool, String> {
        let workers = workers.max(1);
        let (jobs, receiver) = crossbeam_channel::bounded(workers * QUEUE_PER_WORKER);
        let shared = Arc::new(Shared {
            jobs: receiver,
            current,
            workers,
            live: AtomicUsize::new(0),
            next_id: AtomicUsize::new(1),
            abandoned: Mutex::new(Vec::new()),
        });
        for _ in 0..workers {
            spawn(&shared)?;
        }
        Ok(Pool { jobs, shared })
    }

    /// Workers the pool keeps running.
    pub(super) fn workers(&self) -> usize {
        self.shared.workers
    }

    /// Evaluates on a worker; waits asynchronously.
    pub(super) async fn evaluate(&self, facts: Arc<Facts>, tracing: bool) -> Result<Answer, Unanswered> {
        let (sender, mut receiver) = oneshot::channel();
        let enqueued = Instant::now();
        let progress = self.submit(facts, tracing, Reply::Async(sender))?;
        let (mut deadline, mut first_look) = (enqueued + self.look(), None);
        loop {
            match tokio::time::timeout_at(deadline.into(), &mut receiver).await {
                Ok(Ok(answer)) => return Ok(answer),
                Ok(Err(_)) => return Err(Unanswered::Stuck),
                Err(_) => deadline = self.next_deadline(&progress, enqueued, &mut first_look)?,
            }
        }
    }

    /// Evaluates on a worker; blocks the calling thread (tools, tests, benchmarks).
    pub(super) fn evaluate_blocking(&self, facts: Arc<Facts>, tracing: bool) -> Result<Answer, Unanswered> {
        let (sender, receiver) = std::sync::mpsc::sync_channel(1);
        let enqueued = Instant::now();
        let progress = self.submit(facts, tracing, Reply::Blocking(sender))?;
        let (mut deadline, mut first_look) = (enqueued + self.look(), None);
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match receiver.recv_timeout(wait) {
                Ok(answer) => return Ok(answer),
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Err(Unanswered::Stuck),
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    deadline = self.next_deadline(&progress, enqueued, &mut first_look)?;
                }
            }
        }
    }

    fn submit(&self, facts: Arc<Facts>, tracing: bool, reply: Reply) -> Result<Arc<Progress>, Unanswered> {
        let progress = Arc::new(Progress {
            started: AtomicU64::new(0),
            worker: AtomicUsize::new(0),
            clock: AtomicI64::new(i64::MIN),
            cancelled: AtomicBool::new(false),
        });
        let job = Job { facts, tracing, progress: progress.clone(), reply };
        match self.jobs.try_send(job) {
            Ok(()) => Ok(progress),
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => Err(Unanswered::Busy),
        }
    }

    /// The interval between looks at a job, and the CPU time past the first look at which a
    /// started one is stuck: the time limit plus the margin.
    fn look(&self) -> Duration {
        self.shared.current.load().limits.time + MARGIN
    }

    /// After a deadline passed without an answer: the next one, or why to give up (which
    /// cancels the job, and abandons its worker if one started it). `first_look` keeps the
    /// worker's CPU time at the first look at the started job.
    fn next_deadline(
        &self,
        progress: &Progress,
        enqueued: Instant,
        first_look: &mut Option<Duration>,
    ) -> Result<Instant, Unanswered> {
        let now = Instant::now();
        let look = self.look();
        let started = progress.started.load(Ordering::SeqCst);
        if started == 0 {
            if now < enqueued + QUEUE_WAIT {
                return Ok((now + look).min(enqueued + QUEUE_WAIT));
            }
            progress.cancelled.store(true, Ordering::SeqCst);
            // A worker may have taken it in the meantime: judge it as started then.
            if progress.started.load(Ordering::SeqCst) == 0 {
                return Err(Unanswered::Busy);
            }
            return self.next_deadline(progress, enqueued, first_look);
        }
        let started = *EPOCH + Duration::from_nanos(started);
        let cpu = CpuClock::from_raw(progress.clock.load(Ordering::SeqCst)).and_then(CpuClock::read);
        let over_cpu = match (*first_look, cpu) {
            (Some(first), Some(cpu)) => cpu.saturating_sub(first) > look,
            _ => false,
        };
        if first_look.is_none() {
            *first_look = cpu;
        }
        if !over_cpu && now < started + STUCK_WALL {
            return Ok((now + look).min(started + STUCK_WALL));
        }
        progress.cancelled.store(true, Ordering::SeqCst);
        self.abandon(progress.worker.load(Ordering::SeqCst));
        Err(Unanswered::Stuck)
    }

    /// Gives up on a worker: a replacement takes its place, unless too many abandoned threads
    /// are still running.
    fn abandon(&self, worker: usize) {
        let shared = &self.shared;
        {
            let abandoned = shared.abandoned.lock().unwrap_or_else(PoisonError::into_inner);
            let Some((_, flag)) = abandoned.iter().find(|(id, _)| *id == worker) else { return };
            if flag.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        let live = shared.live.load(Ordering::SeqCst);
        let cap = shared.workers * (1 + ABANDONED_PER_WORKER);
        if live >= cap {
            tracing::error!(
                threads = live,
                "a rule worker is stuck and too many stuck ones still run; not replacing it"
            );
            return;
        }
        tracing::error!(worker, "a rule evaluation is stuck past its deadline; replacing its worker");
        if let Err(error) = spawn(shared) {
            tracing::error!(%error, "cannot start a replacement rule worker");
        }
    }
}

fn spawn(shared: &Arc<Shared>) -> Result<(), String> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let flag = Arc::new(AtomicBool::new(false));
    shared.abandoned.lock().unwrap_or_else(PoisonError::into_inner).push((id, flag.clone()));
    shared.live.fetch_add(1, Ordering::SeqCst);
    let worker_shared = shared.clone();
    std::thread::Builder::new()
        .name(format!("quagmire-rules-{id}"))
        .spawn(move || work(&worker_shared, id, &flag))
        .map(|_| ())
        .map_err(|error| {
            shared.live.fetch_sub(1, Ordering::SeqCst);
            format!("cannot start a rule worker: {error}")
        })
}

/// A worker's loop: its own Lua state, until the pool is dropped or the worker abandoned.
fn work(shared: &Shared, id: usize, abandoned: &AtomicBool) {
    let clock = CpuClock::current().map_or(i64::MIN, CpuClock::to_raw);
    let mut evaluator = Evaluator::new();
    // Built before the first job, so that a replacement is ready when jobs arrive; after a
    // reload, each worker builds again at its next job.
    evaluator.prepare(&shared.current.load_full());
    let mut errors = ErrorLog::new();
    while let Ok(job) = shared.jobs.recv() {
        if job.progress.cancelled.load(Ordering::SeqCst) {
            continue;
        }
        let compiled = shared.current.load_full();
        // Building a state for a new ruleset is not the evaluation's time: count from after it.
        evaluator.prepare(&compiled);
        // Once started, a job is always answered: a caller that sees it started waits for it.
        job.progress.worker.store(id, Ordering::SeqCst);
        job.progress.clock.store(clock, Ordering::SeqCst);
        job.progress.started.store(nanos_since_epoch(Instant::now()), Ordering::SeqCst);
        let (decision, trace) = evaluator.evaluate(&compiled, &job.facts, job.tracing);
        errors.record(&compiled.name, &decision.failures);
        let answer = Answer { decision, trace };
        match job.reply {
            Reply::Async(sender) => {
                let _ = sender.send(answer);
            }
            Reply::Blocking(sender) => {
                let _ = sender.send(answer);
            }
        }
        if abandoned.load(Ordering::SeqCst) {
            break;
        }
    }
    // The Lua state goes with `evaluator`: a stuck evaluation's state is never reused.
    drop(evaluator);
    shared.abandoned.lock().unwrap_or_else(PoisonError::into_inner).retain(|(worker, _)| *worker != id);
    shared.live.fetch_sub(1, Ordering::SeqCst);
}
