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

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use crossbeam_channel::{Receiver, Sender, TrySendError};
use tokio::sync::oneshot;

use super::lua::Evaluator;
use super::report::ErrorLog;
use super::watchdog::CpuClock;
use super::{Compiled, Decision, RuleOutcome, WHOLE_RULESET};
use crate::facts::Facts;
use crate::vocabulary::FailureKind;

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
pub(super) struct Evaluated {
    pub(super) decision: Decision,
    pub(super) trace: Vec<RuleOutcome>,
}

enum Reply {
    Async(oneshot::Sender<Evaluated>),
    Blocking(std::sync::mpsc::SyncSender<Evaluated>),
}

/// What the caller and the worker both see of a job.
struct JobProgress {
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
    progress: Arc<JobProgress>,
    reply: Reply,
}

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn nanos_since_epoch(at: Instant) -> u64 {
    u64::try_from(at.saturating_duration_since(*EPOCH).as_nanos()).unwrap_or(u64::MAX).max(1)
}

/// The pool. Dropping it ends the workers once they finish what they are doing.
pub(super) struct Pool {
    jobs: Sender<Job>,
    shared: Arc<PoolState>,
}

/// What workers share with the pool; holds no `Sender`, so that dropping the pool ends them.
struct PoolState {
    jobs: Receiver<Job>,
    current: Arc<ArcSwap<Compiled>>,
    workers: usize,
    /// Threads running, abandoned ones included.
    live: AtomicUsize,
    /// Threads running that are not abandoned: the pool's strength, which supervision keeps at
    /// `workers`.
    active: AtomicUsize,
    next_id: AtomicUsize,
    /// Each running worker's id and its abandoned flag.
    abandoned: Mutex<Vec<(usize, Arc<AtomicBool>)>>,
    /// Held while starting replacements, so two callers never both top the pool up.
    topping_up: Mutex<()>,
    /// Set when the pool is dropped: workers that end then are not replaced.
    closing: AtomicBool,
    /// Jobs skipped because their caller had stopped waiting.
    skipped: AtomicU64,
    /// Set by a test to make the next evaluation panic.
    #[cfg(test)]
    panic_next: AtomicBool,
    /// Set by a test to make the worker that takes the next job die, outside any evaluation.
    #[cfg(test)]
    die_next: AtomicBool,
    /// Jobs a worker has started, for tests that wait for one to be under way.
    #[cfg(test)]
    taken: AtomicU64,
}

/// How many workers a pool has and how busy it is, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Workers taking jobs.
    pub active: usize,
    /// Abandoned threads still running (stuck in a call, ending once it returns).
    pub abandoned: usize,
    /// Jobs waiting for a worker.
    pub queued: usize,
    /// Jobs skipped so far because their caller had stopped waiting (a proxy that timed out).
    pub skipped: u64,
}

impl Pool {
    /// Starts `workers` threads evaluating the ruleset in `current`.
    pub(super) fn start(current: Arc<ArcSwap<Compiled>>, workers: usize) -> Result<Pool, String> {
        let workers = workers.max(1);
        let (jobs, receiver) = crossbeam_channel::bounded(workers * QUEUE_PER_WORKER);
        let shared = Arc::new(PoolState {
            jobs: receiver,
            current,
            workers,
            live: AtomicUsize::new(0),
            active: AtomicUsize::new(0),
            next_id: AtomicUsize::new(1),
            abandoned: Mutex::new(Vec::new()),
            topping_up: Mutex::new(()),
            closing: AtomicBool::new(false),
            skipped: AtomicU64::new(0),
            #[cfg(test)]
            panic_next: AtomicBool::new(false),
            #[cfg(test)]
            die_next: AtomicBool::new(false),
            #[cfg(test)]
            taken: AtomicU64::new(0),
        });
        for _ in 0..workers {
            if let Err(error) = spawn(&shared) {
                // The workers started end with the pool: none may be replaced.
                shared.closing.store(true, Ordering::SeqCst);
                return Err(error);
            }
        }
        Ok(Pool { jobs, shared })
    }

    /// Workers the pool keeps running.
    pub(super) fn workers(&self) -> usize {
        self.shared.workers
    }

    /// Workers active and abandoned, and jobs queued, now.
    pub(super) fn stats(&self) -> PoolStats {
        let live = self.shared.live.load(Ordering::SeqCst);
        let active = self.shared.active.load(Ordering::SeqCst);
        let skipped = self.shared.skipped.load(Ordering::Relaxed);
        PoolStats { active, abandoned: live.saturating_sub(active), queued: self.jobs.len(), skipped }
    }

    /// Makes the next evaluation panic inside the worker, as a bug in a helper would.
    #[cfg(test)]
    pub(super) fn panic_next_evaluation(&self) {
        self.shared.panic_next.store(true, Ordering::SeqCst);
    }

    /// Makes the worker that takes the next job panic outside the evaluation's guard, as a bug
    /// in the worker's own loop would: the thread ends, holding the job.
    #[cfg(test)]
    pub(super) fn kill_next_worker(&self) {
        self.shared.die_next.store(true, Ordering::SeqCst);
    }

    /// Worker threads started so far, replacements included.
    #[cfg(test)]
    pub(super) fn workers_started(&self) -> usize {
        self.shared.next_id.load(Ordering::SeqCst) - 1
    }

    /// Jobs workers have started so far.
    #[cfg(test)]
    pub(super) fn jobs_taken(&self) -> u64 {
        self.shared.taken.load(Ordering::SeqCst)
    }

    /// Evaluates on a worker; waits asynchronously.
    pub(super) async fn evaluate(&self, facts: Arc<Facts>, tracing: bool) -> Result<Evaluated, Unanswered> {
        let (sender, mut receiver) = oneshot::channel();
        let enqueued = Instant::now();
        let progress = self.submit(facts, tracing, Reply::Async(sender))?;
        // A caller that goes away (the proxy timed out and closed the connection) drops this
        // future: its job is cancelled, so no worker evaluates it for nobody.
        let _cancel = CancelOnDrop(&progress);
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
    pub(super) fn evaluate_blocking(
        &self,
        facts: Arc<Facts>,
        tracing: bool,
    ) -> Result<Evaluated, Unanswered> {
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

    fn submit(&self, facts: Arc<Facts>, tracing: bool, reply: Reply) -> Result<Arc<JobProgress>, Unanswered> {
        // Below strength (a replacement refused at the cap, or one that failed to start): try
        // again now. One atomic load when the pool is whole.
        if self.shared.active.load(Ordering::Relaxed) < self.shared.workers {
            top_up(&self.shared);
        }
        let progress = Arc::new(JobProgress {
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
        progress: &JobProgress,
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

    /// Gives up on a worker: it no longer counts towards the pool's strength, and a replacement
    /// takes its place, unless too many abandoned threads are still running; then the
    /// replacement starts when one of them ends.
    fn abandon(&self, worker: usize) {
        let shared = &self.shared;
        {
            let abandoned = shared.abandoned.lock().unwrap_or_else(PoisonError::into_inner);
            let Some((_, flag)) = abandoned.iter().find(|(id, _)| *id == worker) else { return };
            if flag.swap(true, Ordering::SeqCst) {
                return;
            }
        }
        shared.active.fetch_sub(1, Ordering::SeqCst);
        tracing::error!(worker, "a rule evaluation is stuck past its deadline; replacing its worker");
        top_up(shared);
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.closing.store(true, Ordering::SeqCst);
    }
}

/// Marks a job cancelled when its caller stops waiting for it, whatever the reason.
struct CancelOnDrop<'a>(&'a JobProgress);

impl Drop for CancelOnDrop<'_> {
    fn drop(&mut self) {
        self.0.cancelled.store(true, Ordering::SeqCst);
    }
}

/// Starts workers until the pool is back to strength, within the cap on threads (abandoned ones
/// included); what the cap refuses is started by the next call, which comes when an abandoned
/// thread ends or a job is submitted.
fn top_up(shared: &Arc<PoolState>) {
    // Someone else is topping up: they see the same shortfall.
    let Ok(_topping_up) = shared.topping_up.try_lock() else { return };
    let cap = shared.workers * (1 + ABANDONED_PER_WORKER);
    while !shared.closing.load(Ordering::SeqCst) && shared.active.load(Ordering::SeqCst) < shared.workers {
        let live = shared.live.load(Ordering::SeqCst);
        if live >= cap {
            tracing::error!(
                threads = live,
                active = shared.active.load(Ordering::SeqCst),
                "rule workers are stuck and too many stuck ones still run; a replacement starts when one ends"
            );
            return;
        }
        if let Err(error) = spawn(shared) {
            tracing::error!(%error, "cannot start a replacement rule worker");
            return;
        }
    }
}

fn spawn(shared: &Arc<PoolState>) -> Result<(), String> {
    let id = shared.next_id.fetch_add(1, Ordering::Relaxed);
    let flag = Arc::new(AtomicBool::new(false));
    shared.abandoned.lock().unwrap_or_else(PoisonError::into_inner).push((id, flag.clone()));
    shared.live.fetch_add(1, Ordering::SeqCst);
    shared.active.fetch_add(1, Ordering::SeqCst);
    let guard = WorkerGuard { shared: shared.clone(), id, abandoned: flag };
    std::thread::Builder::new()
        .name(format!("quagmire-rules-{id}"))
        .spawn(move || work(guard))
        .map(|_| ())
        .map_err(|error| {
            // The guard went with the closure the thread never ran, and did the bookkeeping;
            // the pool stays short, and the next job submitted tries again.
            format!("cannot start a rule worker: {error}")
        })
}

/// A worker thread's place in the pool. However the thread ends (the pool dropped, abandoned,
/// or a panic outside an evaluation), dropping the guard takes it out of the counts and, unless
/// the pool is closing, starts what the pool is short of.
struct WorkerGuard {
    shared: Arc<PoolState>,
    id: usize,
    abandoned: Arc<AtomicBool>,
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        let shared = &self.shared;
        shared
            .abandoned
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(worker, _)| *worker != self.id);
        if !self.abandoned.load(Ordering::SeqCst) {
            shared.active.fetch_sub(1, Ordering::SeqCst);
        }
        shared.live.fetch_sub(1, Ordering::SeqCst);
        if std::thread::panicking() {
            tracing::error!(worker = self.id, "a rule worker panicked; replacing it");
        }
        top_up(shared);
    }
}

/// A worker's loop: its own Lua state, until the pool is dropped or the worker abandoned.
fn work(guard: WorkerGuard) {
    let (shared, id, abandoned) = (&*guard.shared, guard.id, &*guard.abandoned);
    let clock = CpuClock::current().map_or(i64::MIN, CpuClock::to_raw);
    let mut evaluator = Evaluator::new();
    // Built before the first job, so that a replacement is ready when jobs arrive; after a
    // reload, each worker builds again at its next job.
    evaluator.prepare(&shared.current.load_full());
    let mut errors = ErrorLog::new();
    while let Ok(job) = shared.jobs.recv() {
        if job.progress.cancelled.load(Ordering::SeqCst) {
            shared.skipped.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        #[cfg(test)]
        if shared.die_next.swap(false, Ordering::SeqCst) {
            panic!("a test made this rule worker die");
        }
        let compiled = shared.current.load_full();
        // Building a state for a new ruleset is not the evaluation's time: count from after it.
        evaluator.prepare(&compiled);
        // Once started, a job is always answered: a caller that sees it started waits for it.
        job.progress.worker.store(id, Ordering::SeqCst);
        job.progress.clock.store(clock, Ordering::SeqCst);
        job.progress.started.store(nanos_since_epoch(Instant::now()), Ordering::SeqCst);
        #[cfg(test)]
        shared.taken.fetch_add(1, Ordering::SeqCst);
        let evaluated = std::panic::catch_unwind(AssertUnwindSafe(|| {
            #[cfg(test)]
            if shared.panic_next.swap(false, Ordering::SeqCst) {
                panic!("a test made this evaluation panic");
            }
            evaluator.evaluate(&compiled, &job.facts, job.tracing)
        }));
        let (decision, trace) = match evaluated {
            Ok(answer) => answer,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|text| (*text).to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                tracing::error!(worker = id, message, "a rule evaluation panicked; its Lua state is rebuilt");
                // The state may be half-way through anything: never reuse it.
                evaluator = Evaluator::new();
                let failure = format!("the rules panicked: {message}");
                (
                    Decision::failed(compiled.fail, &Arc::from(WHOLE_RULESET), FailureKind::Panic, &failure),
                    Vec::new(),
                )
            }
        };
        errors.record(&compiled.name, &decision.failures);
        let answer = Evaluated { decision, trace };
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
    // The Lua state goes with `evaluator`, before the guard lets a replacement count: a stuck
    // evaluation's state is never reused.
    drop(evaluator);
}
