//! The time limit on rule code: stops a Lua evaluation that uses more CPU time than its limit
//! without costing the evaluations that don't.
//!
//! Lua 5.4 interrupts running code only from a hook, and while any hook is set its VM stops at
//! every instruction to service it: a count hook cost a quarter of every evaluation. So no hook is
//! set while rules run. Each thread's Lua state has a [`Slot`] saying since when it has been
//! evaluating; a watchdog thread looks at the slots every few milliseconds, reads the CPU time
//! the slot's thread used since the evaluation began, and sends `SIGURG` to a thread past its
//! limit. The signal handler, on that thread, installs a hook that raises "time limit exceeded"
//! (at the rule's own line) at the next VM instruction. This is how the standalone `lua`
//! interpreter stops a script on Ctrl-C.
//!
//! CPU time, not wall time, so that an overloaded machine, which hands a thread its CPU more
//! slowly, never stops a rule that did nothing wrong. The watchdog reads an evaluation's CPU
//! clock first at its second look (at the first, nearly every evaluation is about to end, and
//! reading a running thread's clock can get it preempted), so it may grant up to two looks'
//! intervals more (a look every quarter of the limit, at least every millisecond). One long call
//! into C (`table.sort` of a huge table) is not interrupted until it returns to the VM; the rule
//! pool's deadline is the backstop for that (see `pool.rs`).
//!
//! The stop hook raises an error, and Lua runs a message handler for an error raised in a hook
//! with hooks off: so no message handler may exist. The sandbox has no `xpcall` (the one way for
//! rules to set one) and no coroutines (whose hooks are their own); the driver is called with
//! none.

#![allow(unsafe_code)]

use std::ffi::{CStr, c_char};
use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock, PoisonError};
use std::thread::Thread;
use std::time::{Duration, Instant};

use mlua::ffi;

/// The error a stopped evaluation raises.
pub(super) const TIME_LIMIT_EXCEEDED: &CStr = c"time limit exceeded";

/// `Slot::cpu_baseline` before the watchdog has read the evaluation's CPU clock.
const UNREAD: u64 = u64::MAX;
/// After this many ticks without an evaluation the watchdog sleeps until the next one starts.
const QUIET_TICKS: u32 = 200;
const MIN_TICK: Duration = Duration::from_millis(1);
const MAX_TICK: Duration = Duration::from_millis(50);

/// One Lua state's evaluation clock, shared with the watchdog.
pub(super) struct Slot {
    /// The thread that owns the state; the only one that evaluates in it.
    thread: libc::pthread_t,
    state: AtomicPtr<ffi::lua_State>,
    /// The thread's CPU-time clock.
    cpu_clock: CpuClock,
    /// When the current evaluation started, in nanoseconds since `EPOCH` (never 0); 0 when idle.
    /// It also tells evaluations apart.
    started: AtomicU64,
    /// The current evaluation's limit in nanoseconds of CPU time.
    limit: AtomicU64,
    /// The watchdog's first reading of the thread's CPU clock for an evaluation, and the
    /// `started` it belongs to. Only the watchdog thread touches these.
    cpu_baseline: AtomicU64,
    baseline_of: AtomicU64,
    /// The `started` of the evaluation the watchdog decided to stop.
    stop: AtomicU64,
    /// Whether the stop hook is installed.
    hooked: AtomicBool,
    /// Evaluations started, so the watchdog can tell a quiet service from a busy one.
    evaluations: AtomicU64,
}

/// A slot in the watchdog's list; dropping it takes the slot out. Bound to the thread that made
/// it (the slot names that thread), so not `Send`.
pub(super) struct Registration {
    slot: Arc<Slot>,
    _thread_bound: PhantomData<*const ()>,
}

/// An evaluation being timed; dropping it ends the evaluation. Not `Send`, as `Registration`.
pub(super) struct Running<'a> {
    slot: &'a Slot,
    _thread_bound: PhantomData<*const ()>,
}

thread_local! {
    /// The slot evaluating on this thread, for the signal handler and the stop hook.
    static ACTIVE: AtomicPtr<Slot> = const { AtomicPtr::new(std::ptr::null_mut()) };
}

static EPOCH: LazyLock<Instant> = LazyLock::new(Instant::now);

fn now() -> u64 {
    EPOCH.elapsed().as_nanos() as u64 + 1
}

struct Watchdog {
    slots: Mutex<Vec<Arc<Slot>>>,
    /// Set while the watchdog sleeps for want of evaluations; the next one to start wakes it.
    idle: AtomicBool,
    thread: OnceLock<Thread>,
}

static WATCHDOG: OnceLock<Result<Arc<Watchdog>, String>> = OnceLock::new();

fn watchdog() -> Result<&'static Arc<Watchdog>, String> {
    WATCHDOG.get_or_init(start).as_ref().map_err(Clone::clone)
}

/// Installs the signal handler and starts the watchdog thread, once per process.
fn start() -> Result<Arc<Watchdog>, String> {
    // SAFETY: `on_signal` only reads atomics and calls `lua_sethook`, which Lua's own
    // interpreter calls from its SIGINT handler (`laction` in lua.c; see the comment on
    // `lua_sethook` in ldebug.c).
    unsafe { signal_hook_registry::register(libc::SIGURG, on_signal) }
        .map_err(|error| format!("cannot install the rules' time-limit signal handler: {error}"))?;
    let watchdog = Arc::new(Watchdog {
        slots: Mutex::new(Vec::new()),
        idle: AtomicBool::new(false),
        thread: OnceLock::new(),
    });
    let watched = watchdog.clone();
    let handle = std::thread::Builder::new()
        .name("quagmire-rule-watchdog".into())
        .spawn(move || watched.watch())
        .map_err(|error| format!("cannot start the rules' time-limit watchdog: {error}"))?;
    let _ = watchdog.thread.set(handle.thread().clone());
    Ok(watchdog)
}

impl Watchdog {
    fn watch(&self) {
        let mut seen = 0;
        let mut quiet = 0;
        loop {
            let (busy, evaluations, tick) = self.scan();
            if evaluations != seen {
                seen = evaluations;
                quiet = 0;
            } else {
                quiet += 1;
            }
            if busy || quiet < QUIET_TICKS {
                std::thread::park_timeout(tick);
                continue;
            }
            // Sleep until an evaluation starts. One may have started since the scan and missed
            // `idle`, so scan again after setting it.
            self.idle.store(true, Ordering::SeqCst);
            if self.scan().0 {
                self.idle.store(false, Ordering::SeqCst);
                continue;
            }
            while self.idle.load(Ordering::SeqCst) {
                std::thread::park();
            }
            quiet = 0;
        }
    }

    /// Stops evaluations past their limit; returns whether any is running, the evaluations
    /// started so far, and how long to wait before the next look.
    fn scan(&self) -> (bool, u64, Duration) {
        let now = now();
        // Held while signalling: a slot leaves the list under this lock before its thread can
        // end, so no signal goes to a thread that is gone.
        let slots = self.slots.lock().unwrap_or_else(PoisonError::into_inner);
        let mut busy = false;
        let mut evaluations = 0u64;
        let mut tick = MAX_TICK;
        for slot in slots.iter() {
            evaluations = evaluations.wrapping_add(slot.evaluations.load(Ordering::Relaxed));
            let started = slot.started.load(Ordering::SeqCst);
            let limit = slot.limit.load(Ordering::Relaxed);
            tick = tick.min(Duration::from_nanos(limit / 4));
            if started == 0 {
                continue;
            }
            busy = true;
            // First sight of an evaluation: only noted. Nearly all are over by the next look,
            // and reading the CPU clock of a thread that is running makes the kernel bring its
            // accounting up to date, which can preempt it: a thread serving HTTP (the inline
            // lane) then waits out another thread's time slice, a millisecond or more.
            if slot.baseline_of.swap(started, Ordering::Relaxed) != started {
                slot.cpu_baseline.store(UNREAD, Ordering::Relaxed);
                continue;
            }
            let baseline = slot.cpu_baseline.load(Ordering::Relaxed);
            // Wall time bounds CPU time: no need to read the clock of a young evaluation.
            if baseline != UNREAD && now.saturating_sub(started) <= limit {
                continue;
            }
            let Some(cpu) = slot.cpu_clock.read() else { continue };
            let cpu = u64::try_from(cpu.as_nanos()).unwrap_or(u64::MAX);
            if baseline == UNREAD {
                slot.cpu_baseline.store(cpu, Ordering::Relaxed);
                continue;
            }
            let used = cpu.saturating_sub(baseline);
            // Signal again while the hook is not in: a signal that found nothing to stop is
            // not lost.
            if used > limit && !slot.hooked.load(Ordering::SeqCst) {
                slot.stop.store(started, Ordering::SeqCst);
                // SAFETY: the thread is alive while its slot is listed (see above).
                unsafe { libc::pthread_kill(slot.thread, libc::SIGURG) };
            }
        }
        (busy, evaluations, tick.max(MIN_TICK))
    }
}

impl Registration {
    /// Watches `lua`, which the calling thread owns and evaluates in.
    pub(super) fn new(lua: &mlua::Lua) -> Result<Registration, String> {
        let watchdog = watchdog()?;
        let mut state = std::ptr::null_mut();
        // SAFETY: only reads the pointer of the main state, where calls from Rust run.
        unsafe { lua.exec_raw::<()>((), |raw| state = raw) }
            .map_err(|error| format!("cannot watch a Lua state: {error}"))?;
        // SAFETY: pthread_self has no preconditions.
        let thread = unsafe { libc::pthread_self() };
        let cpu_clock =
            CpuClock::current().ok_or("cannot read this thread's CPU clock for the rules' time limit")?;
        let slot = Arc::new(Slot {
            thread,
            state: AtomicPtr::new(state),
            cpu_clock,
            started: AtomicU64::new(0),
            limit: AtomicU64::new(u64::MAX),
            cpu_baseline: AtomicU64::new(0),
            baseline_of: AtomicU64::new(0),
            stop: AtomicU64::new(0),
            hooked: AtomicBool::new(false),
            evaluations: AtomicU64::new(0),
        });
        watchdog.slots.lock().unwrap_or_else(PoisonError::into_inner).push(slot.clone());
        Ok(Registration { slot, _thread_bound: PhantomData })
    }

    /// Starts timing an evaluation on this thread, stopped once it runs longer than `limit`.
    pub(super) fn start(&self, limit: Duration) -> Running<'_> {
        let slot = &*self.slot;
        // Only this thread writes the counter.
        slot.evaluations.store(slot.evaluations.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        slot.limit.store(u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        // `ACTIVE` before `started`: once the watchdog can see the evaluation, the signal
        // handler must find it, or the stop would be lost.
        ACTIVE.with(|active| active.store(std::ptr::from_ref(slot).cast_mut(), Ordering::SeqCst));
        slot.started.store(now(), Ordering::SeqCst);
        if let Ok(watchdog) = watchdog()
            && watchdog.idle.load(Ordering::SeqCst)
            && watchdog.idle.swap(false, Ordering::SeqCst)
            && let Some(thread) = watchdog.thread.get()
        {
            thread.unpark();
        }
        Running { slot, _thread_bound: PhantomData }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Ok(watchdog) = watchdog() {
            let mut slots = watchdog.slots.lock().unwrap_or_else(PoisonError::into_inner);
            slots.retain(|slot| !Arc::ptr_eq(slot, &self.slot));
        }
    }
}

impl Running<'_> {
    /// Lifts a stop in progress, so that the error it raised can be described (which runs Lua).
    /// One budget per request: an evaluation that was stopped has spent its limit, and gets a
    /// fresh one only for describing the error (the caller ends the evaluation after that); after
    /// any other error the rules go on within what is left of the same limit.
    /// Returns whether the watchdog had stopped the evaluation (the error is the time limit's).
    pub(super) fn lift(&self) -> bool {
        let started = self.slot.started.load(Ordering::SeqCst);
        let stopped =
            self.slot.stop.load(Ordering::SeqCst) == started || self.slot.hooked.load(Ordering::SeqCst);
        if stopped {
            self.slot.started.store(now(), Ordering::SeqCst);
        }
        self.slot.unhook();
        stopped
    }
}

/// A thread's CPU-time clock, which any thread of the process may read while that thread lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct CpuClock(libc::clockid_t);

impl CpuClock {
    /// The calling thread's clock.
    pub(super) fn current() -> Option<CpuClock> {
        let mut clock: libc::clockid_t = 0;
        // SAFETY: pthread_self has no preconditions; the clock id is written to a local.
        (unsafe { libc::pthread_getcpuclockid(libc::pthread_self(), &mut clock) } == 0)
            .then_some(CpuClock(clock))
    }

    /// The clock as a number, to keep in an atomic.
    pub(super) fn to_raw(self) -> i64 {
        i64::from(self.0)
    }

    /// The clock kept by `to_raw`.
    pub(super) fn from_raw(raw: i64) -> Option<CpuClock> {
        libc::clockid_t::try_from(raw).ok().map(CpuClock)
    }

    /// The CPU time the thread has used; `None` once the thread is gone.
    pub(super) fn read(self) -> Option<Duration> {
        let mut time = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: an invalid clock (a thread that ended) makes `clock_gettime` fail, not crash;
        // the result is written to a local.
        if unsafe { libc::clock_gettime(self.0, &mut time) } != 0 {
            return None;
        }
        Some(Duration::new(u64::try_from(time.tv_sec).ok()?, u32::try_from(time.tv_nsec).ok()?))
    }
}

impl Slot {
    /// Removes the stop hook if the signal handler installed one.
    fn unhook(&self) {
        if self.hooked.swap(false, Ordering::SeqCst) {
            // SAFETY: the state is alive and owned by this thread, the only caller.
            unsafe { ffi::lua_sethook(self.state.load(Ordering::Relaxed), None, 0, 0) };
        }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        // After this a late signal finds nothing to stop; a stop that came after the last
        // instruction left its hook behind, which must not stop the next evaluation.
        ACTIVE.with(|active| active.store(std::ptr::null_mut(), Ordering::SeqCst));
        self.slot.started.store(0, Ordering::SeqCst);
        self.slot.unhook();
    }
}

/// SIGURG: installs the stop hook if this thread's evaluation is the one the watchdog stopped.
fn on_signal() {
    let slot = ACTIVE.with(|active| active.load(Ordering::SeqCst));
    if slot.is_null() {
        return;
    }
    // SAFETY: ACTIVE points at a live slot while its thread evaluates, and this handler runs on
    // that thread.
    let slot = unsafe { &*slot };
    let started = slot.started.load(Ordering::SeqCst);
    if started == 0 || started != slot.stop.load(Ordering::SeqCst) {
        return;
    }
    slot.hooked.store(true, Ordering::SeqCst);
    // SAFETY: the state is alive (see above); lua_sethook may be called from a signal handler
    // (see `start`).
    unsafe { ffi::lua_sethook(slot.state.load(Ordering::Relaxed), Some(stop_hook), ffi::LUA_MASKCOUNT, 1) };
}

/// Raises "time limit exceeded" at every instruction until the evaluation returns to Rust, so
/// a rule that catches the error with `pcall` cannot go on. The message names the line of the
/// rule script that was running (the innermost frame of a chunk loaded from a file), not the
/// driver's.
///
/// It cannot panic: it only calls Lua's C API.
unsafe extern "C-unwind" fn stop_hook(state: *mut ffi::lua_State, _: *mut ffi::lua_Debug) {
    if ACTIVE.with(|active| active.load(Ordering::SeqCst)).is_null() {
        // No evaluation to stop (cannot happen: the hook goes before `ACTIVE` is cleared).
        // SAFETY: the hook's own state, on its own thread.
        unsafe { ffi::lua_sethook(state, None, 0, 0) };
        return;
    }
    // SAFETY: raising an error from a hook is allowed; it unwinds only C frames to the nearest
    // protected call, and this frame owns nothing that needs dropping. `lua_getstack` and
    // `lua_getinfo` fill a local record, which is plain data.
    unsafe {
        let mut record: ffi::lua_Debug = std::mem::zeroed();
        let mut level = 0;
        while ffi::lua_getstack(state, level, &mut record) != 0 {
            if ffi::lua_getinfo(state, c"Sl".as_ptr(), &mut record) != 0
                && !record.source.is_null()
                && *record.source == b'@' as c_char
                && record.currentline > 0
            {
                ffi::lua_pushfstring(
                    state,
                    c"%s:%d: %s".as_ptr(),
                    record.short_src.as_ptr(),
                    record.currentline,
                    TIME_LIMIT_EXCEEDED.as_ptr(),
                );
                ffi::lua_error(state);
            }
            level += 1;
        }
        ffi::luaL_error(state, TIME_LIMIT_EXCEEDED.as_ptr());
    }
}
